"""Infra fixtures: the example mesh synthesized (with cdk-nag) once for both workers, the artifact suite and later
runs while its inputs are unchanged (``tests/synthcache.py``), and manifests written to tmp_path.

The first synthesis on a machine builds the dependency layers with pip (cached under ``.cdk.staging/``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from asya_cdk.testing import SynthesizedMesh

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def example_synth(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    """The repository's ``asya.yaml``, synthesized with cdk-nag (synthesis fails on an unacknowledged finding): once
    for both workers and the artifact suite, and again only when its inputs change (``tests/synthcache.py``)."""
    # Imported here, not at the top: this conftest loads before the root conftest's pytest_configure has run when
    # pytest is given tests/infra, and importing aws_cdk starts jsii's Node process.
    from asya_cdk.testing import synthesize_mesh
    from tests.synthcache import cached_cdk_out, load_synthesized

    manifest = REPO / "asya.yaml"
    cdk_out, synth = cached_cdk_out(manifest, lambda outdir: synthesize_mesh(manifest, repo_root=REPO, outdir=outdir))
    if synth is not None:
        return synth
    return load_synthesized(cdk_out, manifest=manifest, scratch=tmp_path_factory.mktemp("cdk-example"))


@pytest.fixture
def write_manifest(tmp_path: Path) -> Callable[[Mapping[str, Any]], Path]:
    """Write a manifest mapping to ``tmp_path/asya.yaml``."""

    def write(data: Mapping[str, Any]) -> Path:
        path = tmp_path / "asya.yaml"
        path.write_text(yaml.safe_dump(dict(data)), encoding="utf-8")
        return path

    return write
