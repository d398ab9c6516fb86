"""Per-task request vectors (``vectors/*.json``, written by ``python -m bench.vectors``) and the demand one task puts
on each resource, derived from them. Pure.

A vector's ``requests`` map ``component|service|operation|key_class`` to requests per task, its ``units`` the same
keys to write units (table and index), read units and S3 requests per task, its ``functions`` each actor's
invocations and records per task; ``watch`` (a watched task) the stream's polls per second.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asya.capacity.quotas import Assumptions

__all__ = [
    "VECTORS_DIR",
    "TaskDemand",
    "Vector",
    "demand_of",
    "load_vector",
    "overlapped",
    "vector_name",
]

#: The committed per-task request vectors.
VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"
_POLLER: Final = frozenset({"ReceiveMessage", "DeleteMessageBatch"})
_CREW_NO_HANDLER: Final = ("x-",)


def vector_name(flow: str, payload: str, history: str, watched: bool) -> str:
    return f"{flow}-{payload}-{history}-{'watched' if watched else 'unwatched'}"


@dataclass(frozen=True)
class Vector:
    """One committed vector document."""

    name: str
    config: Mapping[str, Any]
    requests: Mapping[str, float]
    units: Mapping[str, Mapping[str, float]]
    functions: Mapping[str, Mapping[str, float]]
    watch: Mapping[str, Any] | None

    @classmethod
    def from_document(cls, name: str, document: Mapping[str, Any]) -> Vector:
        return cls(
            name=name,
            config=document["config"],
            requests=document["requests"],
            units=document["units"],
            functions=document["functions"],
            watch=document.get("watch"),
        )

    def with_requests(self, requests: Mapping[str, float]) -> Vector:
        """The same vector with other request counts (what-if: a changed vector)."""
        return Vector(self.name, self.config, dict(requests), self.units, self.functions, self.watch)


def load_vector(name: str, directory: Path = VECTORS_DIR) -> Vector:
    path = directory / f"{name}.json"
    return Vector.from_document(name, json.loads(path.read_text(encoding="utf-8")))


@dataclass
class TaskDemand:
    """What one task of a flow takes from each resource (per task; multiply by the rate for per second)."""

    stage_requests: float = 0.0
    #: seconds of function concurrency per task, by function (Little's law: concurrency = rate x this)
    busy_seconds: dict[str, float] = field(default_factory=dict)
    invocations: dict[str, float] = field(default_factory=dict)
    batch_size: dict[str, float] = field(default_factory=dict)
    wru_table: float = 0.0
    wru_index: dict[str, float] = field(default_factory=dict)
    rru: float = 0.0
    #: write units per task landing on one partition class (``by_created:TASKS#{day}#{shard}``...)
    wru_by_key: dict[str, float] = field(default_factory=dict)
    s3_puts_by_prefix: dict[str, float] = field(default_factory=dict)
    sqs_requests: float = 0.0
    sqs_messages_by_queue: dict[str, float] = field(default_factory=dict)
    lambda_invocations: float = 0.0
    latency_seconds: float = 0.0
    watched_share: float = 0.0

    def scaled(self, share: float) -> TaskDemand:
        def s(d: Mapping[str, float]) -> dict[str, float]:
            return {k: v * share for k, v in d.items()}

        return TaskDemand(
            stage_requests=self.stage_requests * share,
            busy_seconds=s(self.busy_seconds),
            invocations=s(self.invocations),
            batch_size=dict(self.batch_size),
            wru_table=self.wru_table * share,
            wru_index=s(self.wru_index),
            rru=self.rru * share,
            wru_by_key=s(self.wru_by_key),
            s3_puts_by_prefix=s(self.s3_puts_by_prefix),
            sqs_requests=self.sqs_requests * share,
            sqs_messages_by_queue=s(self.sqs_messages_by_queue),
            lambda_invocations=self.lambda_invocations * share,
            latency_seconds=self.latency_seconds,
            watched_share=self.watched_share * share,
        )

    def add(self, other: TaskDemand) -> None:
        self.stage_requests += other.stage_requests
        self.wru_table += other.wru_table
        self.rru += other.rru
        self.sqs_requests += other.sqs_requests
        self.lambda_invocations += other.lambda_invocations
        self.watched_share += other.watched_share
        self.latency_seconds = max(self.latency_seconds, other.latency_seconds)
        for mine, theirs in (
            (self.busy_seconds, other.busy_seconds),
            (self.invocations, other.invocations),
            (self.wru_index, other.wru_index),
            (self.wru_by_key, other.wru_by_key),
            (self.s3_puts_by_prefix, other.s3_puts_by_prefix),
            (self.sqs_messages_by_queue, other.sqs_messages_by_queue),
        ):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0.0) + v
        for k, v in other.batch_size.items():
            self.batch_size[k] = max(self.batch_size.get(k, 0.0), v)


def overlapped(handler_seconds: float, batch: float, record_concurrency: int) -> float:
    """``handler_seconds`` of records run ``record_concurrency`` at a time in batches of ``batch`` records on average:
    an invocation holds its execution for the longest record of each round, not their sum (P-PROC-1)."""
    return handler_seconds / max(1.0, min(float(record_concurrency), batch))


def _split(key: str) -> tuple[str, str, str, str]:
    component, service, operation, key_class = key.split("|", 3)
    return component, service, operation, key_class


def demand_of(
    vector: Vector,
    assumptions: Assumptions,
    *,
    handler_seconds: float | None = None,
    record_concurrency: Mapping[str, int] | None = None,
) -> TaskDemand:
    """The per-task demand of ``vector``. Busy time: each record of a batch runs after the one before (P-PROC-1), so
    an actor's invocation holds one unit of concurrency for ``records x handler time`` plus its calls' latency; an
    actor with ``record_concurrency`` N (async handlers) overlaps the handler time of up to N records of a batch, so
    that part shrinks by ``min(N, records per batch)`` (:func:`overlapped`). The calls stay one after another."""
    handler = assumptions.handler_seconds if handler_seconds is None else handler_seconds
    calls: dict[str, float] = defaultdict(float)
    out = TaskDemand()
    for key, count in vector.requests.items():
        component, service, operation, key_class = _split(key)
        if service == "apigateway":
            out.stage_requests += count
            continue
        if service == "lambda":
            out.lambda_invocations += count
            out.invocations[component] = out.invocations.get(component, 0.0) + count
            continue
        if service == "sqs":
            out.sqs_requests += count
            if operation in ("SendMessage", "SendMessageBatch") and key_class.startswith("queue:"):
                queue = key_class.removeprefix("queue:")
                # a batch send carries up to 10 messages: the receiving actor's records per task say how many
                received = vector.functions.get(queue, {}).get("records")
                out.sqs_messages_by_queue[queue] = (
                    float(received) if received is not None else out.sqs_messages_by_queue.get(queue, 0.0) + count
                )
        if operation not in _POLLER:
            calls[component] += count * assumptions.call_seconds.get(service, 0.0)
    for key, row in vector.units.items():
        _, service, _, key_class = _split(key)
        out.wru_table += row.get("wru_table", 0.0)
        out.rru += row.get("rru", 0.0)
        index_wru = row.get("wru_index", 0.0)
        if index_wru:
            index_class = next((part for part in key_class.split("+")[1:]), "index:?")
            index = index_class.split(":", 1)[0]
            out.wru_index[index] = out.wru_index.get(index, 0.0) + index_wru
            out.wru_by_key[index_class] = out.wru_by_key.get(index_class, 0.0) + index_wru
        if service == "s3" and row.get("s3_tier1"):
            prefix = key_class.removeprefix("s3:")
            out.s3_puts_by_prefix[prefix] = out.s3_puts_by_prefix.get(prefix, 0.0) + row["s3_tier1"]
    latency = 0.0
    route = [a for a in vector.config.get("route", []) if a in vector.functions]
    ordered = [*route, *(a for a in vector.functions if a not in route)]
    for actor in ordered:
        figures = vector.functions[actor]
        records = float(figures["records"])
        invocations = float(figures["invocations"])
        per_record = 0.0 if actor.startswith(_CREW_NO_HANDLER) else handler
        batch = records / invocations if invocations else 1.0
        concurrency = (record_concurrency or {}).get(actor, 1)
        out.busy_seconds[actor] = overlapped(records * per_record, batch, concurrency) + calls.get(actor, 0.0)
        out.batch_size[actor] = batch
        # a record waits on average for half the batch before it, then runs
        busy_per_record = out.busy_seconds[actor] / records if records else 0.0
        latency += busy_per_record * (batch + 1) / 2
    out.busy_seconds["gateway"] = assumptions.gateway_seconds + calls.get("gateway", 0.0) + calls.get("timers", 0.0)
    out.latency_seconds = latency
    if vector.watch is not None:
        out.watched_share = 1.0
        out.busy_seconds["stream"] = latency
        polls = float(vector.watch["polls_per_second"]) * latency
        out.rru += polls * float(vector.watch["rru_per_poll"])
    return out
