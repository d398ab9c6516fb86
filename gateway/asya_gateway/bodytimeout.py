"""A bounded wait for request bodies (GW-GEN-5).

A client that sends fewer bytes than its ``Content-Length`` (or stops mid chunked body) used to hold its request
open, unanswered and unlogged, until the connection died. :class:`BodyTimeoutMiddleware` wraps an HTTP request's
``receive``: while the body is incomplete, each wait for its next part is bounded by ``timeout`` seconds
(``GatewayConfig.body_read_timeout``, environment ``ASYA_BODY_READ_TIMEOUT``, default 5). When it passes, one
WARNING line is logged (method, path, bytes received, bytes declared) and the read raises :class:`HttpError` 400
``request body incomplete: ...``, which the route answers like any bad body. Once the body is complete, ``receive``
is passed through untouched (an SSE stream waits on it for the client's disconnect).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from asya_gateway.errors import HttpError

__all__ = ["BodyTimeoutMiddleware"]

_log = logging.getLogger("asya_gateway.body")


class BodyTimeoutMiddleware:
    """Bound each wait for the next part of an incomplete request body (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, _BoundedReceive(scope, receive, self.timeout), send)


class _BoundedReceive:
    __slots__ = ("_complete", "_receive", "_received", "_scope", "_timeout")

    def __init__(self, scope: Scope, receive: Receive, timeout: float) -> None:
        self._scope = scope
        self._receive = receive
        self._timeout = timeout
        self._complete = False
        self._received = 0

    async def __call__(self) -> Message:
        if self._complete:
            return await self._receive()
        try:
            message = await asyncio.wait_for(self._receive(), self._timeout)
        except TimeoutError:
            raise self._incomplete() from None
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            self._complete = not message.get("more_body", False)
        else:
            self._complete = True
        return message

    def _incomplete(self) -> HttpError:
        declared = _content_length(self._scope)
        _log.warning(
            "request body incomplete after %.1f s: %d of %s bytes received",
            self._timeout,
            self._received,
            declared if declared is not None else "unknown",
            extra={"method": self._scope.get("method"), "path": self._scope.get("path")},
        )
        self._complete = True  # the request is answered; a later receive waits for the disconnect
        expected = f" of {declared}" if declared is not None else ""
        return HttpError(
            400,
            f"request body incomplete: {self._received}{expected} bytes arrived within {self._timeout:g} s",
        )


def _content_length(scope: Scope) -> int | None:
    headers: Any = scope.get("headers") or []
    for name, value in headers:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None
