"""Benchmark 13: busy time per task of an async actor, its batch's records one at a time and at once (P-PROC-1).

One warm ``ActorRuntime`` whose clients answer from memory (``bench.fakes``) runs batches of 10 tracked root envelopes
through :func:`bench.handlers.wait`, an ``async def`` handler that awaits :data:`WAIT_SECONDS` (a model or API call
of the capacity model's 0.2 s handler time), once with ``record_concurrency`` 1 and once with 10. Per batch the wall
time of the invocation (what Lambda bills and what holds one unit of concurrency) is divided by its 10 records: the
busy time per task of this actor's hop, the figure the capacity model multiplies by the rate (Little's law). The CPU
time per record and the AWS calls per record are taken too. A record makes the same pre-flight read share and claim
either way; only the sends can differ: the outbox holds a frame at most 1 s, so ten records one after another at
0.2 s each need two ``SendMessageBatch`` calls, ten that end together one (the per-task request vectors, metered with
handlers that take no time, hold for both).
"""

from __future__ import annotations

import os
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Final

from bench.fakes import FakeClient, InMemoryAws
from bench.overhead import BATCH_SIZE, make_event
from bench.stats import summarize

__all__ = ["CONCURRENCY", "WAIT_SECONDS", "measure", "run"]

#: The handler's await per record: the capacity model's handler time (``asya/capacity/quotas.toml``).
WAIT_SECONDS: Final = 0.2
#: ``record_concurrency`` off (1) and on (the whole batch at once).
CONCURRENCY: Final = (1, BATCH_SIZE)
_REPO: Final = Path(__file__).resolve().parent.parent


class _Context:
    function_name = "asya-bench-wait"
    memory_limit_in_mb = 256
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def _runtime(aws: InMemoryAws, concurrency: int) -> Any:
    from asya.config import ActorConfig
    from asya.sidecar import ActorRuntime

    env = {
        "ASYA_NAMESPACE": "bench",
        "ASYA_ACTOR": "echo",
        "ASYA_HANDLER": "bench.handlers.wait",
        "ASYA_CODE_DIR": str(_REPO),
        "ASYA_TABLE": "asya-bench-tasks",
        "ASYA_BUCKET": "asya-bench-bucket",
        "ASYA_ACTOR_TIMEOUT": "30",
        "ASYA_RECORD_CONCURRENCY": str(concurrency),
    }
    clients: dict[str, Any] = {name: FakeClient(name, aws) for name in ("sqs", "dynamodb", "s3")}
    return ActorRuntime(ActorConfig.from_env(env), **clients, sleep=lambda _seconds: None)


def measure(concurrency: int, *, batches: int, wait_seconds: float = WAIT_SECONDS) -> dict[str, Any]:
    """Busy and CPU milliseconds per record and AWS calls per record over ``batches`` batches of 10 (one warm-up
    batch first)."""
    aws = InMemoryAws()
    with Path(os.devnull).open("w") as sink, redirect_stdout(sink):  # the logger binds stdout when it is built
        runtime = _runtime(aws, concurrency)
        context = _Context()
        busy: list[float] = []
        cpu: list[float] = []
        try:
            for index in range(batches + 1):
                event = make_event({"wait_s": wait_seconds})
                if index == 1:
                    aws.reset()
                wall, process = time.perf_counter(), time.process_time()
                response = runtime.handle(event, context)
                wall, process = time.perf_counter() - wall, time.process_time() - process
                if response["batchItemFailures"]:
                    raise RuntimeError(f"records benchmark: records failed: {response}")
                if index:
                    busy.append(wall * 1000 / BATCH_SIZE)
                    cpu.append(process * 1000 / BATCH_SIZE)
        finally:
            runtime.close()
    records = batches * BATCH_SIZE
    return {
        "record_concurrency": concurrency,
        "batches": batches,
        "busy_ms_per_task": summarize(busy).to_dict(),
        "cpu_ms_per_task": summarize(cpu).to_dict(),
        "calls_per_record": {
            f"{service}:{operation}": count / records for (service, operation), count in sorted(aws.calls.items())
        },
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Both settings, ``record_concurrency`` as the key."""
    batches = 2 if quick else 5
    return {
        "wait_seconds": WAIT_SECONDS,
        "batch_size": BATCH_SIZE,
        "settings": {str(n): measure(n, batches=batches) for n in CONCURRENCY},
    }
