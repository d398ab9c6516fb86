"""A request the server cancels before it answered (its graceful shutdown ran out) is answered 503 with
``Retry-After``, never 500 (GW-GEN-11): the client may send it again to the next server."""

from __future__ import annotations

import asyncio

import pytest
from starlette.types import Message, Receive, Scope, Send

from asya_gateway.requestid import REQUEST_ID_HEADER, RequestIdMiddleware

pytestmark = pytest.mark.unit


def _scope() -> Scope:
    return {"type": "http", "method": "GET", "path": "/api/v1/mesh/t1/events", "headers": [], "query_string": b""}


async def _run(app_started: asyncio.Event, app: object) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    middleware = RequestIdMiddleware(app, retry_after=7)  # type: ignore[arg-type]
    task = asyncio.ensure_future(middleware(_scope(), receive, send))
    await app_started.wait()
    task.cancel()  # what uvicorn does to requests still running when its graceful shutdown times out
    with pytest.raises(asyncio.CancelledError):
        await task
    return sent


def test_a_request_cancelled_before_its_answer_gets_503_with_retry_after() -> None:
    started = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        started.set()
        await asyncio.Event().wait()  # a store read that outlives the shutdown

    sent = asyncio.run(_run(started, app))
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 503
    headers = {name.decode().lower(): value.decode() for name, value in sent[0]["headers"]}
    assert headers["retry-after"] == "7"
    assert REQUEST_ID_HEADER.lower() in headers


def test_a_request_cancelled_after_its_answer_started_sends_nothing_more() -> None:
    started = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        started.set()
        await asyncio.Event().wait()  # an SSE stream

    sent = asyncio.run(_run(started, app))
    assert [message["type"] for message in sent] == ["http.response.start"]
    assert sent[0]["status"] == 200
