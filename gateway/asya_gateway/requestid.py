"""Request ids and the last-resort error answer (GW-GEN-4).

Every response carries ``X-Request-Id``: in AWS the API Gateway request id, which the AWS Lambda Web Adapter passes
in the ``x-amzn-request-context`` header (JSON of the API Gateway request context, key ``requestId``; the adapter
writes that header itself over anything the client sent); locally a UUID4, always: the header is never read outside
Lambda (``trust_request_context=False``), so a caller cannot choose the id its request is logged under. The id is
stored in the ASGI scope (``scope["state"]["request_id"]``, i.e. ``request.state.request_id``) and logged with one
access line per request.

An exception that escapes the app is logged with the id and answered 500 ``{"error": "internal error"}`` when the
response has not started yet, unless it is AWS throttling or unavailability: that is answered 429 or 503 with
``Retry-After`` (GW-OVL-2) and logged as a warning, since nothing is broken. A client that disconnects before the
app answered (Starlette's ``ClientDisconnect``, say mid-body) is the client's doing: one INFO access line with
status :data:`CLIENT_CLOSED` (nginx's 499), no traceback, and nothing sent. A request the server cancels before
it answered (uvicorn cancels what still runs when its graceful shutdown times out) is answered 503 with
``Retry-After`` before the cancellation goes on (GW-GEN-11): the server, not the request, failed, and the client
may send it again to the next one. Left to the server, that answer would be a 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from asya_gateway.config import DEFAULT_RETRY_AFTER_SECONDS
from asya_gateway.errors import INTERNAL_ERROR, RETRY_AFTER, error_response, overload_error

__all__ = [
    "CLIENT_CLOSED",
    "REQUEST_CONTEXT_HEADER",
    "REQUEST_ID_HEADER",
    "RequestIdMiddleware",
    "request_id_from_headers",
]

_log = logging.getLogger("asya_gateway.access")

REQUEST_ID_HEADER: Final = "X-Request-Id"
REQUEST_CONTEXT_HEADER: Final = "x-amzn-request-context"
#: The access-log status of a request whose client went away before the answer (nginx's "client closed request").
CLIENT_CLOSED: Final = 499
#: The message of a request cut by the server's shutdown (GW-GEN-11).
SERVER_STOPPING: Final = "the server is stopping: send the request again"


def request_id_from_headers(headers: Headers, *, trust_request_context: bool) -> str:
    """The API Gateway request id from the Lambda Web Adapter header when ``trust_request_context`` (in Lambda only),
    else a new UUID4."""
    raw = headers.get(REQUEST_CONTEXT_HEADER) if trust_request_context else None
    if raw:
        try:
            context: Any = json.loads(raw)
        except ValueError:
            context = None
        if isinstance(context, dict):
            request_id = context.get("requestId")
            # echoed in a response header: printable ASCII only, or a forged header would break the response
            if isinstance(request_id, str) and 0 < len(request_id) <= 128 and _printable_ascii(request_id):
                return request_id
    return str(uuid.uuid4())


def _printable_ascii(text: str) -> bool:
    return text.isascii() and text.isprintable()


class RequestIdMiddleware:
    """Outermost middleware of the app: request id, access log, 500 for escaped exceptions."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        trust_request_context: bool = False,
        retry_after: int = DEFAULT_RETRY_AFTER_SECONDS,
    ) -> None:
        self.app = app
        self._trust_request_context = trust_request_context
        self._retry_after = retry_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from_headers(Headers(scope=scope), trust_request_context=self._trust_request_context)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.lower().encode("latin-1"), request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except asyncio.CancelledError:
            if not started:
                status = 503
                headers = {RETRY_AFTER: str(self._retry_after), REQUEST_ID_HEADER: request_id}
                await error_response(503, SERVER_STOPPING, headers)(scope, receive, send)
                _log.warning("%s %s: cancelled by the server's shutdown, answered 503", scope["method"], scope["path"])
            raise
        except ClientDisconnect:
            # the client is gone: there is no one to answer, and nothing on our side failed
            status = status if started else CLIENT_CLOSED
        except Exception as exc:
            overload = overload_error(exc, self._retry_after)
            if overload is not None:
                _log.warning(
                    "%s %s: %s (%s)",
                    scope["method"],
                    scope["path"],
                    overload.message,
                    exc,
                    extra={"request_id": request_id},
                )
            else:
                _log.exception(
                    "unhandled error in %s %s", scope["method"], scope["path"], extra={"request_id": request_id}
                )
            if started:
                # Headers are gone; the server closes the connection, which is all the client can be told.
                raise
            if overload is not None:
                status = overload.status
                headers = {**overload.headers, REQUEST_ID_HEADER: request_id}
                response = error_response(status, overload.message, headers)
            else:
                status = 500
                response = error_response(500, INTERNAL_ERROR, {REQUEST_ID_HEADER: request_id})
            await response(scope, receive, send)
        _log.info(
            "%s %s %d",
            scope["method"],
            scope["path"],
            status,
            extra={"request_id": request_id, "method": scope["method"], "path": scope["path"], "status": status},
        )
