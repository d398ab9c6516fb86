"""Actors of the MCP/A2A e2e mesh: one that takes a while (cancel, resubscribe) and one that always fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

#: The longest ``linger`` waits for its gate.
_GATE_SECONDS: Final = 15.0


def linger(payload: dict[str, Any]) -> Iterator[Any]:
    """A FLY tick a second for ``seconds`` (default 4); given ``gate`` (a file path), then on until the test creates
    that file, 15 s at most (the actor's timeout is 20 s), so a test sees the task running however slow the box is."""
    for step in range(int(payload.get("seconds", 4))):
        yield "FLY", f"tick {step}"
        time.sleep(1)
    gate = payload.get("gate")
    until = time.monotonic() + _GATE_SECONDS
    while gate and not Path(str(gate)).exists() and time.monotonic() < until:
        time.sleep(0.05)
    yield {**payload, "lingered": True}


def explode(payload: dict[str, Any]) -> dict[str, Any]:
    raise ValueError(f"cannot process {payload.get('text')!r}")
