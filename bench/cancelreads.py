"""Benchmark 12: the cancel reads of a streaming generator hop (docs/protocol.md P-CANCEL-3, P-CANCEL-5).

Between two yields of a fenced generator handler the layer may read its task's status, at most once every 5 s per
invocation (``asya.cancelwatch``). This benchmark counts the reads a real ``ActorRuntime`` makes: one warm runtime
whose clients answer from memory (``bench.fakes``) runs one tracked root envelope per hop duration through
:func:`bench.handlers.drip`, a generator that yields ``None`` every :data:`YIELD_SECONDS` of a fake monotonic clock it
moves itself (the runtime reads the same clock), so a 300 s hop takes milliseconds and no sleep. Counted: the
``GetItem`` calls of the hop (the pre-flight is a ``BatchGetItem``, GW-DATA-8's one read per batch, not counted).

:func:`price` turns reads into dollars: an eventually consistent read of an item under 4 KB is 0.5 read unit, at
``dynamodb_read_request_unit`` of ``bench/prices.toml`` ($0.0625 per million reads at $0.125 per million units).
"""

from __future__ import annotations

import os
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Final

from bench import handlers
from bench.cost import PriceTable
from bench.fakes import FakeClient, InMemoryAws
from bench.overhead import make_event

__all__ = ["HOP_SECONDS", "READ_UNITS_PER_READ", "YIELD_SECONDS", "measure", "price", "run"]

#: Hop durations measured (seconds of handler time).
HOP_SECONDS: Final = (1, 5, 30, 60, 300)
#: The generator yields this often: more often than the read interval, so the interval alone bounds the reads.
YIELD_SECONDS: Final = 0.5
#: An eventually consistent GetItem of an item under 4 KB (the projected ``status``).
READ_UNITS_PER_READ: Final = 0.5
_REPO: Final = Path(__file__).resolve().parent.parent


class _Context:
    function_name = "asya-bench-echo"
    memory_limit_in_mb = 256
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def _runtime(aws: InMemoryAws) -> Any:
    from asya.config import ActorConfig
    from asya.sidecar import ActorRuntime

    env = {
        "ASYA_NAMESPACE": "bench",
        "ASYA_ACTOR": "echo",
        "ASYA_HANDLER": "bench.handlers.drip",
        "ASYA_CODE_DIR": str(_REPO),
        "ASYA_TABLE": "asya-bench-tasks",
        "ASYA_BUCKET": "asya-bench-bucket",
        "ASYA_ACTOR_TIMEOUT": "900",
    }
    clients: dict[str, Any] = {name: FakeClient(name, aws) for name in ("sqs", "dynamodb", "s3")}
    return ActorRuntime(
        ActorConfig.from_env(env),
        **clients,
        monotonic=lambda: handlers.DRIP_CLOCK[0],
        sleep=lambda _seconds: None,
    )


def measure(hop_seconds: float) -> int:
    """The ``GetItem`` calls one generator hop of ``hop_seconds`` makes (see the module docstring)."""
    aws = InMemoryAws()
    with Path(os.devnull).open("w") as sink, redirect_stdout(sink):  # the logger binds stdout when it is built
        runtime = _runtime(aws)
        yields = round(hop_seconds / YIELD_SECONDS)
        event = make_event({"yields": yields, "step_s": YIELD_SECONDS}, count=1)
        response = runtime.handle(event, _Context())
    if response["batchItemFailures"]:
        raise RuntimeError(f"the {hop_seconds} s generator hop failed: {response}")
    return int(aws.calls[("dynamodb", "GetItem")])


def price(reads: float, prices: PriceTable) -> dict[str, float]:
    """Read units and USD per million hops of ``reads`` cancel reads each. Pure."""
    units = reads * READ_UNITS_PER_READ
    return {
        "reads": reads,
        "rru": units,
        "usd_per_million": units * prices.each("dynamodb_read_request_unit") * 1_000_000,
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Reads per hop duration; :func:`price` is applied by ``python -m bench`` with the price table."""
    return {
        "yield_seconds": YIELD_SECONDS,
        "hops": {str(seconds): {"reads": measure(seconds)} for seconds in HOP_SECONDS},
    }
