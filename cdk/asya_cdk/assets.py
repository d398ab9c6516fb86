"""Where the Lambda code comes from, and the staged gateway asset.

``SourceLayout.from_repo(root)`` names the directories of the repository that become Lambda assets:

| asset | directory | Lambda path |
|---|---|---|
| sidecar layer | ``layers/sidecar`` (``python/asya``) | ``/opt/python/asya`` |
| crew function code | ``crew`` (``asya_crew``) | ``/var/task/asya_crew`` |
| gateway function code | staged from ``gateway`` (``asya_gateway``) | ``/var/task`` |
| user actor code | each actor's ``code`` directory | ``/var/task`` |
| flows layer (only when a flow's programs are too large for the environment, ``asya.flowfile``) | staged
  ``asya_flows.json`` | ``/opt/python/asya_flows.json`` |

The gateway asset is staged into ``<staging>/gateway-<hash>/``: a copy of ``gateway/`` plus ``manifest.json`` (the
validated manifest, read by the gateway through ``ASYA_MANIFEST=/var/task/manifest.json``) and ``run.sh``, the
command the AWS Lambda Web Adapter runs (uvicorn on port 8080). The hash covers every staged byte, so an unchanged
gateway is not copied again and keeps its asset hash (``asya_cdk.staging``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asya.flowfile import FLOWS_FILE_NAME
from asya.manifest import Manifest
from asya_cdk.errors import DeploymentError
from asya_cdk.locks import LOCK_DIR
from asya_cdk.staging import build_once, content_name, copy_files, tree_files

__all__ = [
    "ASSET_EXCLUDES",
    "GATEWAY_MANIFEST_FILE",
    "GATEWAY_RUN_SCRIPT",
    "RUN_SH",
    "SourceLayout",
    "render_manifest_json",
    "stage_flows_layer",
    "stage_gateway_asset",
]

#: Never shipped in a Lambda asset.
ASSET_EXCLUDES: Final = (
    "**/__pycache__",
    "**/*.pyc",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "**/.DS_Store",
)

GATEWAY_MANIFEST_FILE: Final = "manifest.json"
GATEWAY_RUN_SCRIPT: Final = "run.sh"
#: Run by the Lambda Web Adapter (``AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap``). Layers live in /opt/python and the
#: runtime's own packages (boto3) in $LAMBDA_RUNTIME_DIR, neither of which is on the path of a plain ``python``.
RUN_SH: Final = """#!/bin/sh
TASK_ROOT="${LAMBDA_TASK_ROOT:-/var/task}"
cd "$TASK_ROOT" || exit 1
PYTHONPATH="$TASK_ROOT:/opt/python:${LAMBDA_RUNTIME_DIR:-/var/runtime}${PYTHONPATH:+:$PYTHONPATH}" \\
    exec python -m uvicorn asya_gateway.app:create_app --factory --host 0.0.0.0 --port "${PORT:-8080}"
"""


@dataclass(frozen=True, slots=True)
class SourceLayout:
    """Directories of the asya-serverless source tree that the stack packages."""

    sidecar_layer_dir: Path
    crew_dir: Path
    gateway_dir: Path
    pyproject: Path
    staging_dir: Path
    lock_dir: Path

    @classmethod
    def from_repo(cls, root: Path) -> SourceLayout:
        root = root.resolve()
        return cls(
            sidecar_layer_dir=root / "layers" / "sidecar",
            crew_dir=root / "crew",
            gateway_dir=root / "gateway",
            pyproject=root / "pyproject.toml",
            staging_dir=root / ".cdk.staging",
            lock_dir=LOCK_DIR,
        )

    def validate(self) -> None:
        """Raise :class:`DeploymentError` when a source directory is missing."""
        checks = (
            (self.sidecar_layer_dir / "python" / "asya", "the sidecar layer package"),
            (self.crew_dir / "asya_crew", "the crew package"),
            (self.gateway_dir / "asya_gateway", "the gateway package"),
        )
        for path, what in checks:
            if not path.is_dir():
                raise DeploymentError(f"{what} is missing: expected a directory at {path}")
        if not self.pyproject.is_file():
            raise DeploymentError(f"pyproject.toml is missing: expected a file at {self.pyproject}")


def render_manifest_json(manifest: Manifest) -> str:
    """The validated manifest as JSON (defaults applied); ``load_manifest`` reads it back unchanged."""
    return json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=True) + "\n"


def stage_gateway_asset(*, gateway_dir: Path, manifest_json: str, staging_dir: Path) -> Path:
    """Stage ``gateway_dir`` plus ``manifest.json`` and ``run.sh``; return the staged directory."""
    if not (gateway_dir / "asya_gateway").is_dir():
        raise DeploymentError(f"the gateway package is missing: expected a directory at {gateway_dir / 'asya_gateway'}")
    sources = tree_files(gateway_dir)
    name = content_name("gateway", gateway_dir, sources, after=manifest_json.encode() + b"\0" + RUN_SH.encode())

    def fill(scratch: Path) -> None:
        copy_files(gateway_dir, sources, scratch)
        (scratch / GATEWAY_MANIFEST_FILE).write_text(manifest_json, encoding="utf-8")
        run_sh = scratch / GATEWAY_RUN_SCRIPT
        run_sh.write_text(RUN_SH, encoding="utf-8")
        run_sh.chmod(0o755)

    return build_once(staging_dir / name, fill)


def stage_flows_layer(*, flows_json: str, staging_dir: Path) -> Path:
    """Stage the flows layer: ``python/asya_flows.json`` (``asya.flowfile``); return the staged directory."""
    name = content_name("flows", staging_dir, [], before=flows_json.encode())

    def fill(scratch: Path) -> None:
        (scratch / "python").mkdir()
        (scratch / "python" / FLOWS_FILE_NAME).write_text(flows_json, encoding="utf-8")

    return build_once(staging_dir / name, fill)
