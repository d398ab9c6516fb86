"""asya_cdk: the CDK constructs and stack that deploy an asya mesh from ``asya.yaml``.

Use :class:`AsyaMesh` in your own CDK app, or :class:`AsyaStack` (the repository's app, ``cdk/app.py``).

Imports only the contract modules of the runtime (``asya.naming``, ``asya.manifest``, ``asya.tableschema``,
``asya.envnames``, ``asya_deploy.environment``, ``asya.exceptions``). Importing this package creates nothing; building
a mesh checks the committed layer locks and stages the gateway asset; the dependency layers are built by CDK's local
bundling during ``app.synth()`` (``pip install --require-hashes``, cached under ``.cdk.staging/``).
"""

from __future__ import annotations

from asya_cdk.actor import Actor
from asya_cdk.assets import SourceLayout, render_manifest_json, stage_gateway_asset
from asya_cdk.backstop import Backstop
from asya_cdk.backup import TableBackup
from asya_cdk.composition import BuiltApp, build_app, load_cdk_context, synthesize
from asya_cdk.crew import CREW_HANDLERS, SIDECAR_HANDLER, crew_handler
from asya_cdk.dependencies import DependencyBuilder, LockedLayerBundling
from asya_cdk.edgeprops import EdgeProps, MethodThrottle
from asya_cdk.errors import DependencyBuildError, DeploymentError
from asya_cdk.gateway import Gateway, check_auth
from asya_cdk.limits import LimitError, LimitReport, check_assembly, enforce
from asya_cdk.locks import (
    ACTOR_REQUIREMENTS,
    GATEWAY_REQUIREMENTS,
    LAYER_REQUIREMENTS,
    Lock,
    check_lock,
    pinned_requirements,
)
from asya_cdk.lwa import LWA_REGIONS, lwa_layer_arn
from asya_cdk.mesh import AsyaMesh
from asya_cdk.network import MeshNetwork
from asya_cdk.observability import MeshObservability
from asya_cdk.permissions import ROLES, Role
from asya_cdk.settings import CONTEXT, DeploySettings
from asya_cdk.stack import AsyaStack, queue_output_key
from asya_cdk.storage import Storage

__all__ = [
    "ACTOR_REQUIREMENTS",
    "CONTEXT",
    "CREW_HANDLERS",
    "GATEWAY_REQUIREMENTS",
    "LAYER_REQUIREMENTS",
    "LWA_REGIONS",
    "ROLES",
    "SIDECAR_HANDLER",
    "Actor",
    "AsyaMesh",
    "AsyaStack",
    "Backstop",
    "BuiltApp",
    "DependencyBuildError",
    "DependencyBuilder",
    "DeploySettings",
    "DeploymentError",
    "EdgeProps",
    "Gateway",
    "LimitError",
    "LimitReport",
    "Lock",
    "LockedLayerBundling",
    "MeshNetwork",
    "MeshObservability",
    "MethodThrottle",
    "Role",
    "SourceLayout",
    "Storage",
    "TableBackup",
    "build_app",
    "check_assembly",
    "check_auth",
    "check_lock",
    "crew_handler",
    "enforce",
    "load_cdk_context",
    "lwa_layer_arn",
    "pinned_requirements",
    "queue_output_key",
    "render_manifest_json",
    "stage_gateway_asset",
    "synthesize",
]
