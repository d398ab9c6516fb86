"""Trivial actor handlers the overhead and memory benchmarks wrap with the layer (``ASYA_HANDLER=bench.handlers.echo``).

They do no work of their own, so what a benchmark measures around them is the layer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["DRIP_CLOCK", "drip", "echo", "pause", "timed", "wait"]


def echo(payload: Any) -> Any:
    """Return the payload unchanged: one frame to the next actor of the route."""
    return payload


def pause(payload: Any) -> Any:
    """Sleep ``payload["sleep_s"]`` seconds, then return the payload: a handler of known duration (the capacity
    calibration, ``bench.calibrate``)."""
    time.sleep(float(payload["sleep_s"]))
    return payload


async def wait(payload: Any) -> Any:
    """Await ``payload["wait_s"]`` seconds (a model or API call), then return the payload: an async handler whose
    records can overlap (``record_concurrency``, the concurrent-records benchmark ``bench.records``)."""
    await asyncio.sleep(float(payload["wait_s"]))
    return payload


def timed(payload: Any) -> Any:
    """Sleep ``payload["sleep_s"]`` seconds; the payload with the wall-clock ``started`` and ``ended`` of the call (in
    seconds since the epoch): when the slices of a map ran (``bench.maps``)."""
    started = time.time()
    time.sleep(float(payload["sleep_s"]))
    return {**payload, "started": started, "ended": time.time()}


#: The fake monotonic clock of the cancel-read benchmark (``bench.cancelreads``): ``drip`` moves it, the runtime
#: under measurement reads it.
DRIP_CLOCK: list[float] = [0.0]


def drip(payload: Any) -> Iterator[Any]:
    """A streaming generator: ``payload["yields"]`` yields of ``None``, each after ``payload["step_s"]`` seconds of
    :data:`DRIP_CLOCK`, then the payload as its one frame."""
    for _ in range(int(payload["yields"])):
        DRIP_CLOCK[0] += float(payload["step_s"])
        yield None
    yield payload
