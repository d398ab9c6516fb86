"""Waiting in end-to-end tests for something another thread or process does: poll with a bound, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], Any], what: str, limit: float = 60.0) -> Any:
    """Poll until ``condition()`` is truthy and return it; fail naming ``what`` past ``limit`` (a bound, not a timing
    assertion)."""
    stop = time.monotonic() + limit
    while not (value := condition()):
        assert time.monotonic() < stop, f"gave up waiting for {what}"
        time.sleep(0.1)
    return value
