"""JSON-RPC 2.0 framing shared by ``POST /mcp`` (GW-MCP-3) and ``POST /a2a/`` (GW-A2A-3, GW-A2A-14).

One request object per HTTP request: the body is read with the REST limits (GW-GEN-5) and an unparseable body is
-32700, a batch (JSON array) or any other non-object is -32600, an object without ``"jsonrpc": "2.0"`` or with a
non-string ``method`` is -32600. A message without ``id`` is a notification; one without ``method`` but with
``result``/``error`` is a response sent by the client. :class:`RpcError` carries a code, a message and the HTTP status
it travels with (and an optional ``data`` member); :func:`error_body` and :func:`result_body` build the wire
objects.

AWS throttling or unavailability behind a request (GW-OVL-3) is answered by :func:`overload_rpc_error`: the
JSON-RPC error :data:`OVERLOADED` (``data``: ``retry_after`` seconds and ``reason``), sent with HTTP 429 or 503 and
``Retry-After``, as the REST routes answer it, on MCP and on A2A alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from starlette.requests import Request

from asya.exceptions import AsyaError
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.errors import HttpError, overload_error

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "OVERLOADED",
    "PARSE_ERROR",
    "RpcError",
    "RpcMessage",
    "error_body",
    "overload_rpc_error",
    "read_message",
    "result_body",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: GW-OVL-3: AWS throttled the request or did not answer in time (a code of JSON-RPC's implementation-defined server
#: error range; neither MCP nor A2A defines one for overload).
OVERLOADED: Final = -32000


class RpcError(AsyaError):
    """A JSON-RPC error answer; ``http_status`` is the status it is sent with (200 unless the transport says so)."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        http_status: int = 200,
        request_id: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status
        self.request_id = request_id
        self.data = data
        self.headers = dict(headers or {})


def overload_rpc_error(exc: BaseException, retry_after: int, request_id: Any = None) -> RpcError | None:
    """The JSON-RPC answer to AWS throttling or unavailability behind ``exc`` (GW-OVL-3), else ``None``."""
    overload = overload_error(exc, retry_after)
    if overload is None:
        return None
    return RpcError(
        OVERLOADED,
        overload.message,
        http_status=overload.status,
        request_id=request_id,
        data={"retry_after": overload.retry_after, "reason": overload.kind.value},
        headers=overload.headers,
    )


@dataclass(frozen=True, slots=True)
class RpcMessage:
    """One parsed JSON-RPC message sent by the client."""

    method: str | None
    id: Any = None
    params: Mapping[str, Any] = field(default_factory=dict)
    has_id: bool = False

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.has_id


def error_body(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_body(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


async def read_message(request: Request) -> RpcMessage:
    """The body as one JSON-RPC message; raises :class:`RpcError` (-32700/-32600, HTTP 400 or 413)."""
    try:
        body = await read_json_object(request, limit=CREATE_BODY_LIMIT)
    except HttpError as exc:
        code = PARSE_ERROR if exc.message == "invalid JSON body" else INVALID_REQUEST
        if exc.status == 413:
            raise RpcError(INVALID_REQUEST, exc.message, http_status=413) from None
        if code == INVALID_REQUEST:
            raise RpcError(
                code, "a JSON-RPC request must be one JSON object (batches are not served)", http_status=400
            ) from None
        raise RpcError(code, "parse error: the body is not JSON", http_status=400) from None
    request_id = body.get("id")
    if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        # checked first: an id that is not one is never echoed back (JSON-RPC 2.0 answers such requests with null)
        raise RpcError(INVALID_REQUEST, "id must be a string or an integer", http_status=400)
    if body.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "jsonrpc must be '2.0'", http_status=400, request_id=request_id)
    method = body.get("method")
    if method is not None and not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "method must be a string", http_status=400, request_id=request_id)
    if method is None and "result" not in body and "error" not in body:
        raise RpcError(INVALID_REQUEST, "method is required", http_status=400, request_id=request_id)
    params = body.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object", request_id=request_id)
    return RpcMessage(method=method, id=request_id, params=params, has_id="id" in body)
