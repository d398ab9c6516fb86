"""The size bound of a request's head (GW-GEN-10): the request line and the headers together are at most
:data:`MAX_HEAD_BYTES`, API Gateway's own quota for a REST API, so a request the deployed API would refuse is refused
locally too, with an HTTP answer: 431 ``{"error": "request headers are N bytes, over the limit of 10240 (API
Gateway's)"}``, never a reset connection.

The size counts the method, the path and query as sent, and each header as ``name: value`` with its line break. In
Lambda the check is off (``limit=None``): API Gateway has applied it already, and the AWS Lambda Web Adapter adds
headers of its own (``x-amzn-request-context``) that the client never sent. The local server reads heads up to
:data:`READ_HEAD_BYTES` (``asya_local.serving``) so that an oversize one reaches this check instead of uvicorn's
parser limit, which closes the connection.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from asya_gateway.errors import error_response

__all__ = ["MAX_HEAD_BYTES", "READ_HEAD_BYTES", "HeaderLimitMiddleware", "head_size"]

#: API Gateway (REST API): "total combined size of request line and header values", 10,240 bytes.
MAX_HEAD_BYTES: Final = 10 * 1024
#: What the local server reads of a head before it gives up on the connection: far above the limit, so that any
#: head a client plausibly sends gets its 431.
READ_HEAD_BYTES: Final = 1024 * 1024


def head_size(scope: Scope) -> int:
    """Bytes of the request line and headers of ``scope`` as the client sent them (line breaks included)."""
    path = scope.get("raw_path") or str(scope.get("path", "")).encode()
    query = scope.get("query_string") or b""
    line = len(scope.get("method", "")) + 1 + len(path) + (1 + len(query) if query else 0) + len(" HTTP/1.1\r\n")
    return line + sum(len(name) + 2 + len(value) + 2 for name, value in scope.get("headers") or [])


class HeaderLimitMiddleware:
    """431 for a head over ``limit`` bytes; ``limit=None`` checks nothing."""

    def __init__(self, app: ASGIApp, *, limit: int | None = MAX_HEAD_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.limit is not None:
            size = head_size(scope)
            if size > self.limit:
                message = f"request headers are {size} bytes, over the limit of {self.limit} (API Gateway's)"
                await error_response(431, message)(scope, receive, send)
                return
        await self.app(scope, receive, send)
