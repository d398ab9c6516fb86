"""Async handlers for the concurrent-records tests (P-PROC-1), loaded through ASYA_CODE_DIR.

:func:`barrier` is a barrier, not a clock: each call says it started, then waits until ``reset(n)``'s ``n`` calls
have started, so a batch whose records ran one after another never gets past the first (its call meets the actor
timeout instead). Every call logs ``started`` and ``proceeds`` through ``LOG``; a payload with ``"fail": true`` raises
after the barrier.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

LOG = logging.getLogger("concurrent_handlers")
STARTED: list[Any] = []
_BARRIER: list[tuple[int, asyncio.Event]] = []


def reset(expected: int) -> None:
    """The next ``expected`` calls wait for one another."""
    STARTED.clear()
    _BARRIER[:] = [(expected, asyncio.Event())]


async def barrier(payload: dict[str, Any]) -> dict[str, Any]:
    expected, all_started = _BARRIER[0]
    STARTED.append(payload.get("text", payload))
    LOG.info("started")
    if len(STARTED) >= expected:
        all_started.set()
    await all_started.wait()
    LOG.info("proceeds")
    if payload.get("fail"):
        raise ValueError("this record fails")
    return {**payload, "seen": True}


async def hang_or_echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Never returns for a payload with ``"hang": true`` (its time limit ends it); else the payload, seen."""
    if payload.get("hang"):
        await asyncio.Event().wait()
    return {**payload, "seen": True}
