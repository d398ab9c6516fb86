"""HTTP errors of the REST routes: every error body is ``{"error": "<message>"}`` and nothing else (GW-GEN-2).

Route code raises :class:`HttpError`; the app's exception handlers turn it, Starlette's own 404/405
(``HTTPException``) and anything unexpected (500, GW-GEN-4) into that shape.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.exceptions import AsyaError

__all__ = [
    "INTERNAL_ERROR",
    "HttpError",
    "error_response",
    "http_error_handler",
    "starlette_http_exception_handler",
]

INTERNAL_ERROR = "internal error"


class HttpError(AsyaError):
    """An error answer: HTTP status, message, extra headers."""

    def __init__(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one error shape of GW-GEN-2."""
    return JSONResponse({"error": message}, status_code=status, headers=dict(headers or {}))


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return error_response(exc.status, exc.message, exc.headers)


_STARLETTE_MESSAGES = {404: "not found", 405: "method not allowed"}


async def starlette_http_exception_handler(request: Request, exc: Exception) -> Response:
    """Starlette's routing errors in our shape: 404 ``not found``, 405 ``method not allowed`` + ``Allow`` (GW-GEN-3)."""
    assert isinstance(exc, HTTPException)
    message = _STARLETTE_MESSAGES.get(exc.status_code, exc.detail)
    return error_response(exc.status_code, message, exc.headers)
