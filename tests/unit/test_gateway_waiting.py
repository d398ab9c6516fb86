"""``asya_gateway.waiting.paced``: idle ticks while the source is quiet, no event lost to a tick, the limit ends the
wait and closes the source (the keepalive and 840 s rules of GW-SSE-9, GW-MCP-8, GW-A2A-11)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from asya_gateway.waiting import paced

pytestmark = pytest.mark.unit


def test_ticks_while_quiet_and_keeps_every_event() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[int]:
        try:
            yield 1
            await asyncio.sleep(0.12)  # several idle ticks, the pending read survives them
            yield 2
        finally:
            closed.append(True)

    async def run() -> list[int | None]:
        return [item async for item in paced(source(), idle=0.03, limit=5)]

    items = asyncio.run(run())
    assert items[0] == 1 and items[-1] == 2
    assert items[1:-1] and set(items[1:-1]) == {None}
    assert closed == [True]


def test_the_limit_ends_the_wait_and_closes_the_source() -> None:
    closed: list[bool] = []

    async def endless() -> AsyncIterator[int]:
        try:
            while True:
                await asyncio.sleep(10)
                yield 0
        finally:
            closed.append(True)

    async def run() -> list[int | None]:
        return [item async for item in paced(endless(), idle=0.02, limit=0.1)]

    items = asyncio.run(run())
    assert items and set(items) == {None}
    assert closed == [True]
