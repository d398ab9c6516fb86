"""Everything :class:`~asya_cdk.mesh.AsyaMesh` checks before it creates a construct, each check appending readable
problems (``field: value, fix``) to one list, so the caller raises a single error listing them all: the manifest, the
source tree, the gateway's auth, crew targets, code directories, env maps, the runtime and the layer locks. No
network and no file writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

from asya import naming
from asya.exceptions import AsyaError
from asya.manifest import Manifest, load_manifest
from asya_cdk.assets import SourceLayout
from asya_cdk.crew import SIDECAR_HANDLER, crew_handler
from asya_cdk.errors import DeploymentError
from asya_cdk.gateway import check_auth
from asya_cdk.locks import LAYER_REQUIREMENTS, Lock, check_lock, pinned_requirements
from asya_cdk.settings import PYTHON_RUNTIMES
from asya_deploy.environment import ReservedVariableError, check_env_map

__all__ = ["check_locks", "check_manifest", "choose_runtime", "load", "storage_reuse_problems"]


def load(manifest: Manifest | str | Path) -> tuple[Manifest | None, list[str]]:
    if isinstance(manifest, Manifest):
        return manifest, []
    try:
        return load_manifest(Path(manifest)), []
    except AsyaError as exc:
        return None, [f"manifest: {exc}"]


def check_manifest(manifest: Manifest, sources: SourceLayout, problems: list[str]) -> dict[str, str]:
    """Append what cannot be deployed to ``problems``; return each actor's Lambda handler."""
    try:
        check_auth(manifest.gateway.auth)
        sources.validate()
    except DeploymentError as exc:
        problems.append(str(exc))
    if (problem := naming.undeployed_crew(manifest.crew_targets())) is not None:
        problems.append(problem)
    if (missing := manifest.missing_code_dir()) is not None:
        problems.append(missing)
    handlers: dict[str, str] = {}
    for actor in manifest.deployed_actors():
        try:
            handlers[actor.name] = crew_handler(actor.name) if actor.crew else SIDECAR_HANDLER
            check_env_map(actor)
        except (ReservedVariableError, DeploymentError) as exc:
            problems.append(str(exc))
    return handlers


def storage_reuse_problems(manifest: Manifest, given: Mapping[str, object | None]) -> list[str]:
    """The manifest's ``deployment.existing_table`` / ``existing_bucket`` exclude the construct's own way of giving
    or shaping that resource (``given``: the construct's keyword arguments by name)."""
    reused = {
        "existing_table": manifest.deployment.existing_table,
        "existing_bucket": manifest.deployment.existing_bucket,
    }
    clashes = {
        "existing_table": ("existing_table_obj", "table_props"),
        "existing_bucket": ("existing_bucket_obj", "bucket_props"),
    }
    return [
        f"deployment.{setting}, {prop}: give one or the other, not both"
        for setting, props in clashes.items()
        if reused[setting] not in (None, False)
        for prop in props
        if given.get(prop) is not None
    ]


def choose_runtime(manifest: Manifest | None, given: lambda_.Runtime | None, problems: list[str]) -> lambda_.Runtime:
    """The manifest's ``deployment.python_version``, else ``given``, else Python 3.14; a clash is a problem."""
    chosen = None if manifest is None else manifest.deployment.python_version
    if given is not None and given.name not in {r.name for r in PYTHON_RUNTIMES.values()}:
        problems.append(f"runtime: {given.name!r} is not one of the Python runtimes {sorted(PYTHON_RUNTIMES)}")
        return lambda_.Runtime.PYTHON_3_14
    if chosen is not None:
        if given is not None and given.name != PYTHON_RUNTIMES[chosen].name:
            problems.append(
                f"runtime: {given.name!r} clashes with the manifest's deployment.python_version {chosen!r}; "
                "give one of them"
            )
        return PYTHON_RUNTIMES[chosen]
    return given or lambda_.Runtime.PYTHON_3_14


def check_locks(layout: SourceLayout, runtime: lambda_.Runtime, problems: list[str]) -> dict[str, Lock]:
    """The committed lock of each dependency layer, checked against ``pyproject.toml`` (no network)."""
    locks: dict[str, Lock] = {}
    for layer, names in LAYER_REQUIREMENTS.items():
        try:
            requires = pinned_requirements(names, pyproject=layout.pyproject)
            locks[layer] = check_lock(layout.lock_dir, layer, runtime.name.removeprefix("python"), requires)
        except DeploymentError as exc:
            problems.append(str(exc))
    return locks
