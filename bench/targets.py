"""The cost and latency targets (GW-DATA-8) and their verdicts on a results document
(``bench/results/latest.json``). Pure.

Each :class:`Target` reads one figure out of the results (``None`` when that benchmark did not run) and compares it
with its threshold; :func:`evaluate` turns every target into a :class:`Verdict` (``met`` is ``None`` when the figure
is missing). The default configuration is batch size 10 with progress ``hops`` (``b10-hops``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["DEFAULT_CONFIG", "TARGETS", "Target", "Verdict", "evaluate", "get_path"]

DEFAULT_CONFIG: Final = "b10-hops"
_OPS: Final[Mapping[str, Callable[[float, float], bool]]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    "==": operator.eq,
}


def get_path(document: Mapping[str, Any], *path: str) -> Any:
    """``document[path[0]][path[1]]...``, or ``None`` as soon as a step is missing."""
    value: Any = document
    for step in path:
        if not isinstance(value, Mapping) or step not in value:
            return None
        value = value[step]
    return value


@dataclass(frozen=True, slots=True)
class Target:
    key: str
    section: str
    title: str
    op: str
    threshold: float
    unit: str
    extract: Callable[[Mapping[str, Any]], float | None]

    @property
    def text(self) -> str:
        return f"{self.op} {self.threshold:g} {self.unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Verdict:
    key: str
    section: str
    title: str
    value: float | None
    unit: str
    target: str
    met: bool | None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _preflight_only(results: Mapping[str, Any]) -> float | None:
    """Largest number of DynamoDB read requests per actor invocation, or 99 when any read is not the pre-flight
    ``BatchGetItem`` (the target allows one ``BatchGetItem`` per SQS batch and nothing else)."""
    reads = get_path(results, "traffic", DEFAULT_CONFIG, "dynamodb_reads_per_invocation")
    if not isinstance(reads, Mapping):
        return None
    worst = 0.0
    for operations in reads.values():
        for operation, count in operations.items():
            if operation != "BatchGetItem" and count > 0:
                return 99.0
            worst = max(worst, float(count))
    return worst


def _writes_per_intermediate_hop(results: Mapping[str, Any]) -> float | None:
    writes = get_path(results, "traffic", DEFAULT_CONFIG, "dynamodb_write_requests_per_hop")
    if not isinstance(writes, Mapping):
        return None
    users = [float(count) for actor, count in writes.items() if not str(actor).startswith("x-")]
    return max(users) if users else None


def _no_tracer(results: Mapping[str, Any]) -> float | None:
    tracer = get_path(results, "coldstart", "tracer")
    if not isinstance(tracer, Mapping):
        return None
    return float(int(tracer.get("tracers", 0)) + (1 if tracer.get("xray_sdk_imported") else 0))


def _mesh_over_express(step: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda r: _num(get_path(r, "cost", "configs", DEFAULT_CONFIG, "mesh_over_express", step))


def _ratio(results: Mapping[str, Any], top: str, bottom: str) -> float | None:
    row = get_path(results, "cost", "end_to_end", "rows", "10") or {}
    a, b = _num(row.get(top)), _num(row.get(bottom))
    return None if a is None or not b else a / b


TARGETS: Final = (
    Target(
        "overhead_1kb",
        "1",
        "Layer overhead per 1 KB envelope (median, batch of 10, in-memory AWS)",
        "<=",
        100,
        "µs",
        lambda r: _num(get_path(r, "overhead", "fake", "1kb", "overhead_us", "median")),
    ),
    Target(
        "overhead_1kb_ab",
        "1",
        "Layer overhead per 1 KB envelope, this build / the baseline build (interleaved A/B; 120 µs at its 210 µs)",
        "<=",
        round(120 / 210, 3),
        "x",
        lambda r: _num(get_path(r, "ab", "overhead", "current_over_baseline")),
    ),
    Target(
        "sqs_per_hop",
        "2",
        "SQS requests per envelope-hop, the create's send and timer traffic excluded (batch 10, progress hops)",
        "<=",
        0.3,
        "",
        lambda r: _num(get_path(r, "traffic", DEFAULT_CONFIG, "sqs_per_hop_without_create")),
    ),
    Target(
        "wru_per_task",
        "2",
        "DynamoDB write units per task, table and indexes (batch 10, progress hops, no FLY)",
        "<=",
        8,
        "WRU",
        lambda r: _num(get_path(r, "traffic", DEFAULT_CONFIG, "services", "dynamodb", "per_task", "wru")),
    ),
    Target(
        "writes_per_intermediate_hop",
        "2",
        "DynamoDB write requests per intermediate hop (the hop claim; most of any user actor)",
        "<=",
        1,
        "",
        _writes_per_intermediate_hop,
    ),
    Target(
        "rru_per_hop",
        "2",
        "DynamoDB read units per envelope-hop",
        "<=",
        1,
        "RRU",
        lambda r: _num(get_path(r, "traffic", DEFAULT_CONFIG, "services", "dynamodb", "per_hop", "rru")),
    ),
    Target(
        "s3_put_per_task",
        "2",
        "S3 PUT (tier-1) requests per task",
        "<=",
        0.2,
        "",
        lambda r: _num(get_path(r, "traffic", DEFAULT_CONFIG, "services", "s3", "per_task", "s3_tier1")),
    ),
    Target(
        "reads_per_batch",
        "2",
        "DynamoDB reads per actor invocation: the pre-flight BatchGetItem only (99 = other reads)",
        "<=",
        1,
        "",
        _preflight_only,
    ),
    Target(
        "cheaper_than_standard",
        "3",
        "Step Functions Standard cost / mesh cost (orchestration, per million tasks)",
        ">=",
        8,
        "x",
        lambda r: _num(get_path(r, "cost", "configs", DEFAULT_CONFIG, "standard_over_mesh")),
    ),
    Target(
        "below_express_1s",
        "3",
        "Mesh cost / Step Functions Express cost, steps of 1 s",
        "<",
        1,
        "x",
        _mesh_over_express("1s"),
    ),
    Target(
        "below_express_10s",
        "3",
        "Mesh cost / Step Functions Express cost, steps of 10 s",
        "<",
        1,
        "x",
        _mesh_over_express("10s"),
    ),
    Target(
        "hop_p50",
        "4",
        "Local hop latency p50",
        "<=",
        25,
        "ms",
        lambda r: _num(get_path(r, "latency", "low_load", "hop_ms", "median")),
    ),
    Target(
        "throughput",
        "4",
        "Local throughput at saturation",
        ">=",
        40,
        "tasks/s",
        lambda r: _num(get_path(r, "latency", "saturation", "tasks_per_second")),
    ),
    Target(
        "coldstart_ratio",
        "5",
        "Actor entry import time / boto3 import time (medians over 40 importer stack depths)",
        "<=",
        1.5,
        "x",
        lambda r: _num(get_path(r, "coldstart", "actor_over_boto3")),
    ),
    Target(
        "coldstart_ab",
        "5",
        "Actor entry import time / boto3 import time, interleaved with the baseline build's",
        "<=",
        1.3,
        "x",
        lambda r: _num(get_path(r, "ab", "coldstart", "current_over_boto3")),
    ),
    Target(
        "no_tracer",
        "5",
        "Tracers created + X-Ray SDK imported with tracing off",
        "==",
        0,
        "",
        _no_tracer,
    ),
    Target(
        "peak_rss",
        "6",
        "Peak RSS, 100 batches of 10 x 256 KB",
        "<=",
        128,
        "MB",
        lambda r: _num(get_path(r, "memory", "peak_rss_mb")),
    ),
    Target(
        "watch_10s_cheaper",
        "9",
        "Watching one 10 s task: today's cost / the new build's (stream duration x memory + reads)",
        ">=",
        7,
        "x",
        lambda r: _num(get_path(r, "cost", "end_to_end", "rows", "10", "today_over_new")),
    ),
    Target(
        "watch_50_share",
        "9",
        "Watching 50 tasks over one stream, per task / watching one task alone (10 s tasks)",
        "<=",
        0.1,
        "x",
        lambda r: _num(get_path(r, "cost", "end_to_end", "rows", "10", "many_over_one")),
    ),
    Target(
        "e2e_unwatched_vs_standard",
        "9",
        "End to end, unwatched: Step Functions Standard / mesh (ingress on both sides, 10 s task)",
        ">=",
        1,
        "x",
        lambda r: _ratio(r, "sfn_standard", "unwatched"),
    ),
    Target(
        "e2e_watched_vs_standard",
        "9",
        "End to end, watched 10 s: Step Functions Standard (DescribeExecution every 2 s) / mesh (SSE, new)",
        ">=",
        1,
        "x",
        lambda r: _ratio(r, "sfn_standard_watched", "sse_new"),
    ),
    Target(
        "e2e_unwatched_vs_express",
        "9",
        "End to end, unwatched: mesh / Step Functions Express (10 s task)",
        "<",
        1,
        "x",
        lambda r: _ratio(r, "unwatched", "sfn_express"),
    ),
    Target(
        "e2e_watched_vs_express",
        "9",
        "End to end, watched 10 s: mesh (SSE, new) / Step Functions Express (StartSyncExecution)",
        "<",
        1,
        "x",
        lambda r: _ratio(r, "sse_new", "sfn_express_watched"),
    ),
)


def evaluate(results: Mapping[str, Any], targets: tuple[Target, ...] = TARGETS) -> list[Verdict]:
    verdicts = []
    for target in targets:
        value = target.extract(results)
        met = None if value is None else _OPS[target.op](value, target.threshold)
        verdicts.append(
            Verdict(
                key=target.key,
                section=target.section,
                title=target.title,
                value=value,
                unit=target.unit,
                target=target.text,
                met=met,
            )
        )
    return verdicts
