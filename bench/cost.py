"""Benchmark 3: orchestration cost per million tasks from the meter's figures and ``bench/prices.toml``. Pure.

The mesh's orchestration cost of one task is what AWS bills for everything but the handlers' own work:

- the SQS, DynamoDB and S3 requests and units the meter counted (gateway, layer, crew and pollers);
- one Lambda request per invocation the pollers made (user actors and crew alike: conservative, a Step Functions
  flow would invoke the same handlers once per step on top of its own price);
- the Lambda duration the layer adds: for each envelope an actor or crew Lambda handles, the layer's CPU time
  (``bench.overhead``, real botocore clients) stretched by the share of a vCPU the function's memory buys
  (``memory_mb / 1769``: AWS documents one full vCPU at 1,769 MB), plus the time spent waiting on each AWS call the
  function made (``assumptions.call_ms``), at the function's memory. Pollers' ``ReceiveMessage``/``DeleteMessageBatch``
  run in the Lambda service, not in the function, and cost no duration.

Not included, on either side: the ingress (API Gateway and the gateway Lambda, or ``StartExecution``), storage
(checkpoints in S3, expired items), and idle polling (about a fixed sum per queue and month).

Step Functions, same flow (``steps`` Task states): Standard bills ``steps * sfn_transitions_per_step`` transitions;
Express bills one request plus the execution's duration, ``steps * step_seconds`` rounded up to 100 ms, at 64 MB.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FULL_VCPU_MEMORY_MB",
    "Price",
    "PriceError",
    "PriceTable",
    "TaskProfile",
    "compare",
    "dynamodb_provisioned_cost",
    "load_prices",
    "mesh_cost",
    "orchestration_gb_seconds",
    "sfn_express_cost",
    "sfn_standard_cost",
    "task_profile",
]

FULL_VCPU_MEMORY_MB: Final = 1769
PER_MILLION: Final = 1_000_000
_REQUIRED_PRICES: Final = (
    "sqs_request",
    "dynamodb_write_request_unit",
    "dynamodb_read_request_unit",
    "dynamodb_provisioned_wcu_hour",
    "dynamodb_provisioned_rcu_hour",
    "s3_tier1_request",
    "s3_tier2_request",
    "lambda_request",
    "lambda_arm_gb_second",
    "sfn_standard_transition",
    "sfn_express_request",
    "sfn_express_gb_second",
    "apigw_rest_request",
)
_PRICE_FIELDS: Final = ("price", "per", "unit", "region", "date", "source")


class PriceError(ValueError):
    """``prices.toml`` lacks a price or a field, or holds a bad value; the message names it."""


@dataclass(frozen=True, slots=True)
class Price:
    name: str
    price: float
    per: float
    unit: str
    region: str
    date: str
    source: str

    @property
    def each(self) -> float:
        """USD for one unit."""
        return self.price / self.per


@dataclass(frozen=True, slots=True)
class PriceTable:
    prices: Mapping[str, Price]
    call_ms: Mapping[str, float]
    sfn_transitions_per_step: int
    sfn_express_memory_mb: int
    sfn_step_seconds: tuple[float, ...]
    dynamodb_provisioned_utilization: float = 0.7

    def each(self, name: str) -> float:
        return self.prices[name].each


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PriceError(f"{where} must be a non-negative number, got {value!r}")
    return float(value)


def load_prices(text: str) -> PriceTable:
    """Parse ``prices.toml``; raises :class:`PriceError` naming the missing or bad field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"prices.toml is not valid TOML: {exc}") from None
    raw_prices = data.get("prices")
    if not isinstance(raw_prices, dict):
        raise PriceError("prices.toml: missing [prices.*] tables")
    prices: dict[str, Price] = {}
    for name in _REQUIRED_PRICES:
        entry = raw_prices.get(name)
        if not isinstance(entry, dict):
            raise PriceError(f"prices.{name}: missing")
        for key in _PRICE_FIELDS:
            if key not in entry:
                raise PriceError(f"prices.{name}.{key}: missing")
        per = _number(entry["per"], f"prices.{name}.per")
        if per == 0:
            raise PriceError(f"prices.{name}.per must be > 0, got {entry['per']!r}")
        prices[name] = Price(
            name=name,
            price=_number(entry["price"], f"prices.{name}.price"),
            per=per,
            unit=str(entry["unit"]),
            region=str(entry["region"]),
            date=str(entry["date"]),
            source=str(entry["source"]),
        )
    assumptions = data.get("assumptions")
    if not isinstance(assumptions, dict):
        raise PriceError("prices.toml: missing [assumptions]")
    call_ms = assumptions.get("call_ms")
    if not isinstance(call_ms, dict):
        raise PriceError("assumptions.call_ms: missing")
    steps = assumptions.get("sfn_step_seconds")
    if not isinstance(steps, list) or not steps:
        raise PriceError(f"assumptions.sfn_step_seconds must be a non-empty list, got {steps!r}")
    return PriceTable(
        prices=prices,
        call_ms={k: _number(v, f"assumptions.call_ms.{k}") for k, v in call_ms.items()},
        sfn_transitions_per_step=int(_number(assumptions.get("sfn_transitions_per_step"), "sfn_transitions_per_step")),
        sfn_express_memory_mb=int(_number(assumptions.get("sfn_express_memory_mb"), "sfn_express_memory_mb")),
        sfn_step_seconds=tuple(_number(s, "assumptions.sfn_step_seconds[]") for s in steps),
        dynamodb_provisioned_utilization=_utilization(assumptions.get("dynamodb_provisioned_utilization")),
    )


def _utilization(value: object) -> float:
    share = _number(value, "assumptions.dynamodb_provisioned_utilization")
    if not 0 < share <= 1:
        raise PriceError(f"assumptions.dynamodb_provisioned_utilization must be in (0, 1], got {value!r}")
    return share


@dataclass(frozen=True, slots=True)
class TaskProfile:
    """What one task of the flow uses, from the meter (per task averages)."""

    steps: int
    sqs_billed_requests: float
    dynamodb_wru: float
    dynamodb_rru: float
    s3_tier1: float
    s3_tier2: float
    lambda_invocations: float
    lambda_gb_seconds: float


def orchestration_gb_seconds(
    *,
    calls: Mapping[str, Mapping[str, float]],
    envelopes: Mapping[str, float],
    memory_mb: Mapping[str, int],
    layer_cpu_ms: float,
    call_ms: Mapping[str, float],
) -> float:
    """GB-seconds of Lambda duration the layer adds per task: for each function (``memory_mb`` key), its AWS calls
    per task by service times ``call_ms``, plus ``envelopes`` per task times the layer's CPU time stretched by the
    vCPU share of its memory."""
    total = 0.0
    for function, memory in memory_mb.items():
        share = min(1.0, memory / FULL_VCPU_MEMORY_MB)
        waiting = sum(count * call_ms.get(service, 0.0) for service, count in calls.get(function, {}).items())
        cpu = envelopes.get(function, 0.0) * layer_cpu_ms / share
        total += (waiting + cpu) / 1000 * memory / 1024
    return total


def task_profile(traffic: Mapping[str, Any], *, layer_cpu_ms: float, call_ms: Mapping[str, float]) -> TaskProfile:
    """The profile of one metered configuration (``bench.traffic.measure``'s result)."""
    services = traffic["services"]

    def per_task(service: str, key: str) -> float:
        return float(services.get(service, {}).get("per_task", {}).get(key, 0.0))

    functions = traffic["function_calls_per_task"]
    return TaskProfile(
        steps=int(traffic["steps"]),
        sqs_billed_requests=per_task("sqs", "billed_requests"),
        dynamodb_wru=per_task("dynamodb", "wru"),
        dynamodb_rru=per_task("dynamodb", "rru"),
        s3_tier1=per_task("s3", "s3_tier1"),
        s3_tier2=per_task("s3", "s3_tier2"),
        lambda_invocations=float(traffic["lambda_invocations_per_task"]),
        lambda_gb_seconds=orchestration_gb_seconds(
            calls=functions,
            envelopes=traffic["envelopes_per_task"],
            memory_mb={name: int(traffic["memory_mb"][name]) for name in functions if name in traffic["memory_mb"]},
            layer_cpu_ms=layer_cpu_ms,
            call_ms=call_ms,
        ),
    )


def mesh_cost(profile: TaskProfile, prices: PriceTable) -> dict[str, float]:
    """USD per million tasks by line item, and ``total``."""
    lines = {
        "sqs_requests": profile.sqs_billed_requests * prices.each("sqs_request"),
        "dynamodb_writes": profile.dynamodb_wru * prices.each("dynamodb_write_request_unit"),
        "dynamodb_reads": profile.dynamodb_rru * prices.each("dynamodb_read_request_unit"),
        "s3_requests": profile.s3_tier1 * prices.each("s3_tier1_request")
        + profile.s3_tier2 * prices.each("s3_tier2_request"),
        "lambda_requests": profile.lambda_invocations * prices.each("lambda_request"),
        "lambda_duration": profile.lambda_gb_seconds * prices.each("lambda_arm_gb_second"),
    }
    out = {name: value * PER_MILLION for name, value in lines.items()}
    out["total"] = sum(out.values())
    return out


def dynamodb_provisioned_cost(profile: TaskProfile, prices: PriceTable) -> dict[str, float]:
    """USD per million tasks of the task's DynamoDB units on provisioned capacity used at the assumed utilization
    (one capacity unit-hour carries ``3600 * utilization`` one-unit requests): what a steady high-volume user pays."""
    requests_per_unit_hour = 3600 * prices.dynamodb_provisioned_utilization
    writes = profile.dynamodb_wru * prices.each("dynamodb_provisioned_wcu_hour") / requests_per_unit_hour
    reads = profile.dynamodb_rru * prices.each("dynamodb_provisioned_rcu_hour") / requests_per_unit_hour
    return {"dynamodb_writes": writes * PER_MILLION, "dynamodb_reads": reads * PER_MILLION}


def sfn_standard_cost(steps: int, prices: PriceTable) -> float:
    """USD per million executions of a ``steps``-state Standard workflow."""
    return steps * prices.sfn_transitions_per_step * prices.each("sfn_standard_transition") * PER_MILLION


def sfn_express_cost(steps: int, step_seconds: float, prices: PriceTable) -> float:
    """USD per million executions of a ``steps``-state Express workflow whose steps take ``step_seconds`` each."""
    billed_seconds = math.ceil(round(steps * step_seconds * 10, 6)) / 10
    memory_gb = math.ceil(prices.sfn_express_memory_mb / 64) * 64 / 1024
    duration = billed_seconds * memory_gb * prices.each("sfn_express_gb_second")
    return (prices.each("sfn_express_request") + duration) * PER_MILLION


def compare(profile: TaskProfile, prices: PriceTable) -> dict[str, Any]:
    """The mesh's cost against Step Functions Standard and Express for the same flow."""
    mesh = mesh_cost(profile, prices)
    standard = sfn_standard_cost(profile.steps, prices)
    express = {f"{seconds:g}s": sfn_express_cost(profile.steps, seconds, prices) for seconds in prices.sfn_step_seconds}
    total = mesh["total"]
    provisioned = dynamodb_provisioned_cost(profile, prices)
    provisioned_total = total - mesh["dynamodb_writes"] - mesh["dynamodb_reads"] + sum(provisioned.values())
    return {
        "mesh": mesh,
        "mesh_dynamodb_provisioned": {**provisioned, "total": provisioned_total},
        "sfn_standard": standard,
        "sfn_express": express,
        "standard_over_mesh": standard / total if total else None,
        "standard_over_mesh_provisioned": standard / provisioned_total if provisioned_total else None,
        "mesh_over_express": {name: total / value for name, value in express.items()},
    }
