"""User handlers for the HTTP reporter tests (loaded through ASYA_CODE_DIR, P-ABI-1)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any


def chatty(payload: dict[str, Any]) -> Iterator[Any]:
    """Twenty FLY values, then one frame that carries how long the handler itself ran (``handler_ms``)."""
    started = time.perf_counter()
    for index in range(20):
        yield ("FLY", {"partial": index})
    yield {**payload, "handler_ms": (time.perf_counter() - started) * 1000}
