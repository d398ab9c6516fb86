"""Bounded waits on a followed task with idle ticks, for the streamed answers of MCP and A2A (GW-MCP-8, GW-A2A-11).

:func:`paced` re-yields the events of an async iterator, yields ``None`` after each ``idle`` seconds without one
(the caller writes a ``:keepalive`` comment, GW-SSE-9) and stops when ``limit`` seconds have passed since it started,
closing the source. The pending read is never cancelled by an idle tick, only at the end, so no event is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TypeVar

__all__ = ["paced"]

_T = TypeVar("_T")


async def paced(events: AsyncIterator[_T], *, idle: float, limit: float) -> AsyncIterator[_T | None]:
    """See the module docstring."""
    ends_at = time.monotonic() + limit
    pending: asyncio.Future[_T] | None = None
    try:
        while True:
            left = ends_at - time.monotonic()
            if left <= 0:
                return
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=min(idle, left))
            if not done:
                if time.monotonic() < ends_at:
                    yield None
                continue
            future, pending = pending, None
            try:
                value = future.result()
            except StopAsyncIteration:
                return
            yield value
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
