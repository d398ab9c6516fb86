"""A synchronous ``httpx`` client over an ASGI app in-process, for the gateway tests that read whole responses.

``httpx.ASGITransport`` calls the app directly, with no socket, server thread or port; it is asynchronous, and the
tests are not, so :class:`SyncAsgiTransport` runs it on an event loop of its own in one thread for the client's life
(the app sees one loop across requests, as under uvicorn). The transport collects each response whole before
returning it: a test that reads a stream as it is written (SSE) still needs a real server (``serve_asgi``). An
exception the app does not handle becomes its 500 response, as a server sends it, not an error in the test.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx

#: The base URL of the in-process clients (no socket: the host is only what the app reads from the request).
BASE_URL = "http://127.0.0.1"


class SyncAsgiTransport(httpx.BaseTransport):
    def __init__(self, app: Any) -> None:
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=("127.0.0.1", 50000))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-asgi-loop", daemon=True)
        self._thread.start()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        inner = httpx.Request(request.method, request.url, headers=request.headers, content=body)
        return asyncio.run_coroutine_threadsafe(self._send(inner), self._loop).result()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        response = await self._asgi.handle_async_request(request)
        content = await response.aread()
        return httpx.Response(response.status_code, headers=response.headers, content=content)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def asgi_client(app: Any, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` (``kwargs`` as for it) whose requests run ``app`` in-process."""
    kwargs.setdefault("base_url", BASE_URL)
    return httpx.Client(transport=SyncAsgiTransport(app), **kwargs)
