"""The settings a manifest's declared target (``capacity``, docs/capacity.md) derives, applied to the synthesized mesh.

:func:`checked_plan` plans the target (``asya.capacity.plan``) and refuses, with a :class:`DeploymentError` naming
each quota to raise (or setting to change) and the value that serves the target, a target the account's declared
quotas cannot serve. Without a declared target nothing is derived or refused: the manifest's settings stand.

:func:`apply_plan` sets, through CloudFormation property overrides: each actor event source's
``ScalingConfig.MaximumConcurrency`` or, past what standard mode runs, ``ProvisionedPollerConfig`` (minimum =
maximum, so a ramp starts at full capacity); the created table's ``WarmThroughput``. The stage throttle and the
gateway's ``ASYA_RETRY_AFTER_SECONDS`` are handed to the gateway construct by :class:`AsyaMesh`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from asya.capacity import CapacityPlan, declared, load_quotas, plan, refusal
from asya.manifest import GatewayEdge, Manifest
from asya_cdk.errors import DeploymentError

__all__ = ["apply_plan", "checked_plan", "planned_edge"]

_MAX_MINIMUM_POLLERS = int(load_quotas()["esm_sqs_max_minimum_pollers"])


def checked_plan(manifest: Manifest) -> CapacityPlan | None:
    """The plan of a declared target, or ``None``; raises when the target cannot be served."""
    if not declared(manifest):
        return None
    result = plan(manifest)
    problem = refusal(result)
    if problem is not None:
        raise DeploymentError(problem)
    return result


def planned_edge(edge: GatewayEdge, result: CapacityPlan | None) -> GatewayEdge:
    """``edge`` with the stage throttle the plan derived (never lower than the manifest's)."""
    if result is None:
        return edge
    throttle = edge.throttle.model_copy(
        update={"rate_limit": result.settings.stage_rate, "burst_limit": result.settings.stage_burst}
    )
    return edge.model_copy(update={"throttle": throttle})


def _mapping(function: lambda_.Function) -> Any:
    for child in function.node.children:
        if isinstance(child, lambda_.EventSourceMapping):
            return child.node.default_child
    raise DeploymentError(f"{function.node.path}: no event source mapping to size")


def apply_plan(result: CapacityPlan | None, functions: Mapping[str, lambda_.Function], table: Any) -> None:
    """Set the event sources' concurrency or pollers and the table's warm throughput (module docstring)."""
    if result is None:
        return
    settings = result.settings
    for name, function in functions.items():
        pollers = settings.pollers.get(name)
        cap = settings.max_concurrency.get(name)
        if pollers:
            mapping = _mapping(function)
            mapping.add_deletion_override("Properties.ScalingConfig")
            mapping.add_property_override(
                "ProvisionedPollerConfig",
                {"MinimumPollers": min(pollers, _MAX_MINIMUM_POLLERS), "MaximumPollers": pollers},
            )
        elif cap is not None:
            _mapping(function).add_property_override("ScalingConfig.MaximumConcurrency", min(cap, 1000))
    if isinstance(table, dynamodb.Table) and (settings.warm_wru or settings.warm_rru):
        warm: dict[str, int] = {}
        if settings.warm_wru:
            warm["WriteUnitsPerSecond"] = settings.warm_wru
        if settings.warm_rru:
            warm["ReadUnitsPerSecond"] = settings.warm_rru
        table.node.default_child.add_property_override("WarmThroughput", warm)  # type: ignore[union-attr]
