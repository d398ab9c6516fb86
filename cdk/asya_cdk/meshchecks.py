"""Every check :class:`~asya_cdk.mesh.AsyaMesh` makes before it creates anything, collected into one error.

:func:`check_mesh` loads the manifest, merges the ``edge`` prop into it (:mod:`asya_cdk.edgeprops`), and checks the
caller's props (:mod:`asya_cdk.props`), the manifest (sources, handlers, env maps), placement, concurrency, reused
storage, the VPC settings, the web adapter's region and the layer locks. Every problem of every check is collected
and raised as one :class:`~asya_cdk.errors.DeploymentError` naming the field, the bad value and the fix; on success
it returns what building the mesh needs (:class:`CheckedMesh`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asya.manifest import Manifest
from asya_cdk.actor import retention_problems
from asya_cdk.assets import SourceLayout
from asya_cdk.checks import check_locks, check_manifest, choose_runtime, load, storage_reuse_problems
from asya_cdk.concurrency import concurrency_problems
from asya_cdk.edgeauth import check_edge
from asya_cdk.edgeprops import EdgeProps, merge_edge
from asya_cdk.errors import DeploymentError
from asya_cdk.locks import Lock
from asya_cdk.lwa import lwa_layer_arn
from asya_cdk.network import network_problems
from asya_cdk.placement import placement_problems
from asya_cdk.props import check_props, given_fields

__all__ = ["CheckedMesh", "check_mesh"]


@dataclass(frozen=True)
class CheckedMesh:
    """What the checks established: the manifest (with the ``edge`` prop merged), the runtime, each actor's handler,
    the web adapter layer's ARN (``None`` when the caller gives the layer) and the layer locks by name."""

    manifest: Manifest
    runtime: lambda_.Runtime
    handlers: Mapping[str, str]
    adapter_arn: str | None
    locks: Mapping[str, Lock]


def check_mesh(
    scope: Construct,
    manifest: Manifest | str | Path,
    *,
    layout: SourceLayout,
    runtime: lambda_.Runtime | None,
    hooks: Mapping[str, object | None],
    existing: Mapping[str, object | None],
    vpc_given: bool,
    subnets_given: bool,
    web_adapter_given: bool,
    lwa_layer_version: int,
    edge: EdgeProps | None,
) -> CheckedMesh:
    """Run every check (module docstring); ``hooks`` are the ``xxx_props`` by name, ``existing`` the
    ``existing_table_obj`` / ``existing_bucket_obj``."""
    loaded, problems = load(manifest)
    problems += check_props(hooks)
    for existing_name, props_name in (("existing_table_obj", "table_props"), ("existing_bucket_obj", "bucket_props")):
        if existing[existing_name] is not None and hooks[props_name] is not None:
            problems.append(f"{existing_name}, {props_name}: give one or the other, not both")
    problems += retention_problems(given_fields(hooks["queue_props"]), given_fields(hooks["dead_letter_queue_props"]))
    chosen = choose_runtime(loaded, runtime, problems)
    handlers: dict[str, str] = {}
    if loaded is not None:
        merged, edge_problems = merge_edge(loaded.gateway.edge, edge)
        problems += edge_problems or check_edge(merged)
        if merged is not loaded.gateway.edge:
            loaded = loaded.model_copy(update={"gateway": loaded.gateway.model_copy(update={"edge": merged})})
        handlers = check_manifest(loaded, layout, problems)
        problems += placement_problems([a.name for a in loaded.deployed_actors()], loaded.deployment)
        problems += concurrency_problems(loaded)
        problems += storage_reuse_problems(loaded, {**hooks, **existing})
        problems += network_problems(loaded, vpc_given=vpc_given, subnets_given=subnets_given)
    adapter_arn: str | None = None
    if not web_adapter_given and loaded is not None:
        try:
            adapter_arn = lwa_layer_arn(Stack.of(scope).region, lwa_layer_version)
        except DeploymentError as exc:
            problems.append(str(exc))
    locks = check_locks(layout, chosen, problems) if loaded is not None else {}
    if problems or loaded is None:
        raise DeploymentError("cannot deploy this mesh:\n- " + "\n- ".join(problems))
    return CheckedMesh(manifest=loaded, runtime=chosen, handlers=handlers, adapter_arn=adapter_arn, locks=locks)
