"""HTTP errors of the REST routes: every error body is ``{"error": "<message>"}`` and nothing else (GW-GEN-2).

Route code raises :class:`HttpError`; the app's exception handlers turn it, Starlette's own 404/405
(``HTTPException``) and anything unexpected (500, GW-GEN-4) into that shape. AWS throttling or unavailability
(:func:`asya.overload.overload_of`) is never a 500: :func:`overload_error` makes it a 429 or 503 with
``Retry-After`` (GW-OVL-2).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.exceptions import AsyaError
from asya.overload import Overload, overload_of

__all__ = [
    "INTERNAL_ERROR",
    "RETRY_AFTER",
    "HttpError",
    "OverloadError",
    "error_response",
    "http_error_handler",
    "overload_error",
    "starlette_http_exception_handler",
]

INTERNAL_ERROR = "internal error"
RETRY_AFTER = "Retry-After"


class HttpError(AsyaError):
    """An error answer: HTTP status, message, extra headers."""

    def __init__(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


class OverloadError(HttpError):
    """AWS throttled the mesh (429) or could not answer in time (503): the client should come back after
    ``retry_after`` seconds (GW-OVL-2). ``kept`` says that the task the request created was kept ``pending`` (its
    undo failed too): a retry with the same ``Idempotency-Key`` resumes it rather than creating another."""

    def __init__(self, kind: Overload, retry_after: int, *, kept: bool = False, reason: str | None = None) -> None:
        status = 429 if kind is Overload.THROTTLED else 503
        what = "AWS throttled the request" if kind is Overload.THROTTLED else "AWS did not answer in time"
        super().__init__(status, f"the mesh is overloaded ({reason or what}); retry after {retry_after} s")
        self.headers[RETRY_AFTER] = str(retry_after)
        self.kind = kind
        self.retry_after = retry_after
        self.kept = kept


def overload_error(exc: BaseException, retry_after: int) -> OverloadError | None:
    """The 429/503 answer for ``exc`` when it is AWS throttling or unavailability (GW-OVL-2), else ``None``."""
    if isinstance(exc, OverloadError):
        return exc
    kind = overload_of(exc)
    return None if kind is None else OverloadError(kind, retry_after)


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
