"""Actors of the MCP/A2A e2e mesh: one that takes a while (cancel, resubscribe) and one that always fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any


def linger(payload: dict[str, Any]) -> Iterator[Any]:
    for step in range(int(payload.get("seconds", 4))):
        yield "FLY", f"tick {step}"
        time.sleep(1)
    yield {**payload, "lingered": True}


def explode(payload: dict[str, Any]) -> dict[str, Any]:
    raise ValueError(f"cannot process {payload.get('text')!r}")
