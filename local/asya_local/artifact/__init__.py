"""The artifact mesh: a local mesh built from a synthesized cloud assembly (``cdk.out``), never from the manifest.

:class:`ArtifactMesh` runs it (``asya dev --artifact cdk.out``) and updates it with another assembly
(:meth:`ArtifactMesh.update`, checked by :func:`plan_update`); :func:`load_assembly` and :func:`read_mesh` read
what the templates say. docs/deploy.md, "The artifact mesh", says what is emulated and what is not.
"""

from __future__ import annotations

from asya_local.artifact.mesh import ArtifactMesh
from asya_local.artifact.model import MeshSpec, read_mesh
from asya_local.artifact.process import FunctionError
from asya_local.artifact.restage import RestageError
from asya_local.artifact.template import TemplateError, load_assembly
from asya_local.artifact.update import MeshUpdate, ReplacementError, UpdateError, plan_update

__all__ = [
    "ArtifactMesh",
    "FunctionError",
    "MeshSpec",
    "MeshUpdate",
    "ReplacementError",
    "RestageError",
    "TemplateError",
    "UpdateError",
    "load_assembly",
    "plan_update",
    "read_mesh",
]
