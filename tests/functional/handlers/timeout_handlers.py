"""User handlers for the time-limit tests (P-TIME-5..7, P-ERR-7), loaded through ASYA_CODE_DIR (P-ABI-1).

The sleeping handlers sleep in short steps for up to :data:`LONG` seconds (far past every limit the tests set, yet
a missing interruption fails a test instead of hanging it) and swallow every ``Exception``, as careless user code
does: only an interruption that is not an ``Exception`` stops them early. ``EVENTS`` records what the generators
did, ``SPENT`` the simulated time ``costly`` handlers use up (tests read both through ``sys.modules``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

LONG = 20.0
EVENTS: list[str] = []
SPENT: list[float] = []


def _sleep_long() -> None:
    end = time.monotonic() + LONG
    while time.monotonic() < end:
        try:
            time.sleep(0.02)
        except Exception:
            EVENTS.append("swallowed")


def sleepy(payload: Any) -> Any:
    """Returns only after :data:`LONG` seconds."""
    _sleep_long()
    return payload


class Sleeper:
    """A class handler whose method sleeps for :data:`LONG` seconds (P-ABI-3)."""

    def process(self, payload: Any) -> Any:
        _sleep_long()
        return payload


def one_then_sleep(payload: dict[str, Any]) -> Iterator[Any]:
    """A generator: one frame, then sleeps; ``finally`` tells whether it was closed."""
    try:
        yield {**payload, "frame": 0}
        EVENTS.append("sleeping")
        _sleep_long()
        yield {**payload, "frame": 1}
    finally:
        EVENTS.append("closed")


async def async_sleepy(payload: Any) -> Any:
    """An async handler that awaits for :data:`LONG` seconds."""
    await asyncio.sleep(LONG)
    return payload


async def async_one_then_sleep(payload: dict[str, Any]) -> AsyncIterator[Any]:
    """An async generator: one frame, then awaits for a long time."""
    try:
        yield {**payload, "frame": 0}
        await asyncio.sleep(LONG)
        yield {**payload, "frame": 1}
    finally:
        EVENTS.append("closed")


def nap(payload: dict[str, Any]) -> dict[str, Any]:
    """Takes a moment (0.2 s), far less than its actor timeout."""
    time.sleep(0.2)
    return {**payload, "napped": True}


def costly(payload: dict[str, Any]) -> dict[str, Any]:
    """Uses up ``payload["cost"]`` seconds of simulated Lambda time (the test's context counts ``SPENT``)."""
    SPENT.append(float(payload["cost"]))
    return {**payload, "done": True}
