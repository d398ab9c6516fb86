"""User handlers for the HTTP reporter tests (loaded through ASYA_CODE_DIR, P-ABI-1)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

#: chatty sleeps this long after each FLY value, so the layer flushes FLY values while the handler runs (P-STAT-16)
PAUSE_SECONDS = 0.12


def chatty(payload: dict[str, Any]) -> Iterator[Any]:
    """Four FLY values with a pause after each, then one frame carrying how long the handler ran (``handler_ms``)
    and how much of it was its own sleeping (``slept_ms``): the difference is what the layer cost it."""
    started = time.perf_counter()
    for index in range(4):
        yield ("FLY", {"partial": index})
        time.sleep(PAUSE_SECONDS)
    yield {**payload, "handler_ms": (time.perf_counter() - started) * 1000, "slept_ms": 4 * PAUSE_SECONDS * 1000}
