"""Benchmark 1: CPU time the layer spends per envelope around a trivial handler, AWS replaced by in-memory fakes.

For each payload size (about 1 KB and 100 KB), batches of 10 SQS records are fed to one warm ``ActorRuntime`` whose
handler (:func:`bench.handlers.echo`) returns its payload; every record is a tracked root envelope with the default
progress detail, so each runs the whole hot path: parse, pre-flight, route check, ``processing`` write, handler,
frame send, partial batch response. Per batch the process CPU time (``time.process_time_ns``, all threads) is taken
and divided by 10. In the same run the handler is called directly on the same payloads, and the difference is the
layer's overhead. Events are built outside the timed region.

Two client kinds: ``fake`` (:class:`bench.fakes.FakeClient`, the target figure: the layer alone) and ``botocore``
(real boto3 clients answered in memory: the layer plus botocore's request building, for the cost model). A separate,
untimed ``cProfile`` pass says where the layer's time goes (self time by module).
"""

from __future__ import annotations

import gc
import json
import os
import time
import uuid
from collections.abc import Callable
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from bench.fakes import FAKE_ACCOUNT, FAKE_REGION, FakeClient, InMemoryAws, botocore_client
from bench.handlers import echo
from bench.stats import summarize

__all__ = [
    "BATCH_SIZE",
    "NAMESPACE",
    "make_event",
    "make_payload",
    "make_runtime",
    "module_label",
    "profile_shares",
    "run",
]

BATCH_SIZE: Final = 10
NAMESPACE: Final = "bench"
ACTOR: Final = "echo"
_REPO: Final = Path(__file__).resolve().parent.parent


class _Context:
    """The part of the Lambda context object the layer reads."""

    function_name = f"asya-{NAMESPACE}-{ACTOR}"
    memory_limit_in_mb = 256
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def make_payload(size_bytes: int) -> dict[str, Any]:
    """A JSON object of many small fields, about ``size_bytes`` long when encoded (parsing cost depends on shape)."""
    items: list[dict[str, Any]] = []
    payload: dict[str, Any] = {"kind": "bench", "items": items}
    size = len(_compact(payload))
    while size < size_bytes:
        k = len(items)
        item = {"i": k, "name": f"item-{k}", "value": k * 0.5, "tags": ["alpha", "beta"], "ok": k % 2 == 0}
        items.append(item)
        size += len(_compact(item)) + (1 if k else 0)
    return payload


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def make_event(payload: Any, *, count: int = BATCH_SIZE, now: datetime | None = None) -> dict[str, Any]:
    """An SQS event of ``count`` records, each a fresh tracked envelope for the ``echo`` actor mid-route."""
    moment = now or datetime.now(UTC)
    created = (moment - timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    deadline = (moment + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    queue_arn = f"arn:aws:sqs:{FAKE_REGION}:{FAKE_ACCOUNT}:asya-{NAMESPACE}-{ACTOR}"
    records = []
    for _ in range(count):
        envelope = {
            "id": str(uuid.uuid4()),
            "route": {"prev": ["start"], "curr": ACTOR, "next": ["after"]},
            "headers": {"x-asya-flow": "bench"},
            "status": {
                "phase": "pending",
                "actor": ACTOR,
                "attempt": 1,
                "max_attempts": 1,
                "created_at": created,
                "updated_at": created,
                "deadline_at": deadline,
            },
            "payload": payload,
        }
        body = json.dumps(envelope, separators=(",", ":"))
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": str(uuid.uuid4()),
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "0",
                    "SenderId": "bench",
                    "ApproximateFirstReceiveTimestamp": "0",
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": FAKE_REGION,
            }
        )
    return {"Records": records}


def make_runtime(aws: InMemoryAws, *, client_kind: str = "fake", log_level: str = "") -> Any:
    """A warm ``ActorRuntime`` of the ``echo`` actor whose clients answer from ``aws``."""
    from asya.config import ActorConfig
    from asya.sidecar import ActorRuntime

    env = {
        "ASYA_NAMESPACE": NAMESPACE,
        "ASYA_ACTOR": ACTOR,
        "ASYA_HANDLER": "bench.handlers.echo",
        "ASYA_CODE_DIR": str(_REPO),
        "ASYA_TABLE": f"asya-{NAMESPACE}-tasks",
        "ASYA_BUCKET": f"asya-{NAMESPACE}-bucket",
        "ASYA_ACTOR_TIMEOUT": "30",
    }
    if log_level:
        env["POWERTOOLS_LOG_LEVEL"] = log_level
    make: Callable[[str, InMemoryAws], Any] = FakeClient if client_kind == "fake" else botocore_client
    return ActorRuntime(
        ActorConfig.from_env(env),
        sqs=make("sqs", aws),
        dynamodb=make("dynamodb", aws),
        s3=make("s3", aws),
        sleep=lambda _seconds: None,
    )


def _measure(payload: dict[str, Any], *, batches: int, warmup: int, client_kind: str) -> dict[str, Any]:
    aws = InMemoryAws()
    with Path(os.devnull).open("w") as sink, redirect_stdout(sink):  # the logger binds stdout when it is built
        runtime = make_runtime(aws, client_kind=client_kind)
    context = _Context()
    layer: list[float] = []
    direct: list[float] = []
    failures = 0
    gc.collect()
    for index in range(warmup + batches):
        event = make_event(payload)
        if index == warmup:
            aws.reset()
        started = time.process_time_ns()
        response = runtime.handle(event, context)
        spent = time.process_time_ns() - started
        failures += len(response.get("batchItemFailures", []))
        payloads = [json.loads(record["body"])["payload"] for record in event["Records"]]
        started = time.process_time_ns()
        for item in payloads:
            echo(item)
        direct_spent = time.process_time_ns() - started
        if index >= warmup:
            layer.append(spent / BATCH_SIZE / 1000)
            direct.append(direct_spent / BATCH_SIZE / 1000)
    if failures:
        raise RuntimeError(f"overhead benchmark: {failures} records failed; the measurement would be meaningless")
    envelopes = batches * BATCH_SIZE
    overhead = [a - b for a, b in zip(layer, direct, strict=True)]
    return {
        "client": client_kind,
        "payload_bytes": len(_compact(payload)),
        "batches": batches,
        "batch_size": BATCH_SIZE,
        "layer_us": summarize(layer).to_dict(),
        "direct_us": summarize(direct).to_dict(),
        "overhead_us": summarize(overhead).to_dict(),
        "calls_per_envelope": {
            f"{service}:{operation}": count / envelopes for (service, operation), count in sorted(aws.calls.items())
        },
    }


def module_label(filename: str) -> str:
    """Where a profiled function lives, coarsely: ``asya.<module>`` (``asya.store`` for the store package), else the
    top-level package or stdlib module, ``builtins`` for C functions, ``bench`` for the fakes. Pure."""
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    parts = Path(filename).with_suffix("").parts
    for anchor in ("asya", "asya_crew"):
        if anchor in parts:
            rest = parts[parts.index(anchor) + 1 :]
            depth = 1 if len(rest) > 1 else len(rest)
            return ".".join((anchor, *rest[:depth])) if rest else anchor
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    if "bench" in parts:
        return "bench"
    stdlib = [i for i, part in enumerate(parts) if part.startswith("python3.")]
    if stdlib and stdlib[-1] + 1 < len(parts):
        return parts[stdlib[-1] + 1]
    return parts[-1]


def profile_shares(payload: dict[str, Any], *, batches: int, top: int = 8) -> dict[str, float]:
    """Share of the layer's CPU time by :func:`module_label` (self time, ``cProfile``, garbage collection paused),
    the ``top`` largest."""
    import cProfile
    import pstats

    aws = InMemoryAws()
    with Path(os.devnull).open("w") as sink, redirect_stdout(sink):
        runtime = make_runtime(aws)
    context = _Context()
    events = [make_event(payload) for _ in range(batches)]
    runtime.handle(make_event(payload), context)
    # CPU time, so a busy machine does not skew the shares; collection paused, or its pauses would be charged to
    # whichever function happened to allocate when one started
    profiler = cProfile.Profile(time.process_time)
    gc.collect()
    gc.disable()
    try:
        profiler.enable()
        for event in events:
            runtime.handle(event, context)
        profiler.disable()
    finally:
        gc.enable()
    stats: Any = getattr(pstats.Stats(profiler), "stats")  # noqa: B009 - the raw table is not in pstats' stubs
    totals: dict[str, float] = {}
    for (filename, _line, _name), (_calls, _primitive, self_time, _cumulative, _callers) in stats.items():
        label = module_label(filename)
        totals[label] = totals.get(label, 0.0) + self_time
    grand = sum(totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return {label: value / grand for label, value in ranked}


def run(*, quick: bool = False) -> dict[str, Any]:
    """Every payload size with fake clients, then with in-memory botocore clients."""
    scale = 0.2 if quick else 1.0
    cases = [
        ("1kb", 1024, 400, 40),
        ("100kb", 100 * 1024, 80, 10),
    ]
    results: dict[str, Any] = {"fake": {}, "botocore": {}}
    for kind in ("fake", "botocore"):
        for name, size, batches, warmup in cases:
            count = max(10, int(batches * scale * (1.0 if kind == "fake" else 0.5)))
            results[kind][name] = _measure(make_payload(size), batches=count, warmup=warmup, client_kind=kind)
    results["profile"] = {
        name: profile_shares(make_payload(size), batches=max(5, batches // 10)) for name, size, batches, _ in cases
    }
    return results
