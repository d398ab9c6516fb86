"""``POST /mcp`` at protocol ``2026-07-28``: one self-contained request per POST, no handshake, no session.

Every request carries its envelope in ``params._meta`` (``io.modelcontextprotocol/protocolVersion``,
``.../clientCapabilities``, optionally ``.../clientInfo`` and ``.../logLevel``) and the routing headers. It is
checked in this order, the first failure answering (HTTP 400):

1. ``params._meta`` is an object with the protocol version and the client capabilities, else -32602;
2. ``MCP-Protocol-Version`` equals the envelope's version, ``Mcp-Method`` the method, and for ``tools/call``
   ``Mcp-Name`` (plain, or ``=?base64?...?=``) the tool name; none of them is sent twice; else -32020 (header
   mismatch);
3. the version is served, else -32022 with ``data: {"supported": [every served version], "requested"}``, which
   tells a client both that ``2026-07-28`` is served and that ``initialize`` still is.

Methods: ``server/discover`` (the supported per-request versions, capabilities ``tools`` and ``logging``),
``tools/list`` and ``tools/call`` (``asya_gateway.mcp.calls``); anything else, including the handshake era's
``initialize``, ``ping`` and ``logging/setLevel``, is -32601 with HTTP 404. Errors travel with the statuses of the
era's table: -32601 404; -32700, -32600, -32602, -32020, -32021, -32022 400; others 200. Every result carries
``resultType: "complete"`` and ``_meta["io.modelcontextprotocol/serverInfo"]``; ``server/discover`` and
``tools/list`` also carry ``ttlMs`` (:data:`LIST_TTL_MS`: the tools change only with a deploy) and
``cacheScope: "private"`` (a cache is not to be shared across credentials). FLY values reach a call only when its
envelope asks for log messages at ``info`` or below (``.../logLevel``; absent: none, as the era says).

A notification answers 202 and is dropped: this era has no client notifications over HTTP; a client cancels a call
by closing its response stream, which cancels the call's task (``asya_gateway.mcp.calls``). An ``Mcp-Session-Id``
header is ignored.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya_gateway.context import GatewayContext
from asya_gateway.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
    RpcMessage,
    result_body,
)
from asya_gateway.mcp.calls import CallOptions, call_tool
from asya_gateway.mcp.sessions import LOG_LEVELS
from asya_gateway.mcp.tools import list_tools
from asya_gateway.mcp.versions import (
    CLIENT_CAPABILITIES_META,
    LOG_LEVEL_META,
    METHOD_HEADER,
    MODERN_VERSIONS,
    NAME_HEADER,
    PROTOCOL_VERSION_META,
    PROTOCOL_VERSIONS,
    SERVER_INFO_META,
    VERSION_HEADER,
)
from asya_gateway.version import VERSION

__all__ = ["HEADER_MISMATCH", "LIST_TTL_MS", "UNSUPPORTED_PROTOCOL_VERSION", "http_status", "serve_modern"]

HEADER_MISMATCH: Final = -32020
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
#: How long a client may cache ``server/discover`` and ``tools/list`` (5 min: a deploy is seen that soon).
LIST_TTL_MS: Final = 300_000

_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
_ROUTING_HEADERS: Final = (VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
_CAPABILITIES: Final = {"tools": {"listChanged": False}, "logging": {}}


def http_status(code: int) -> int:
    """The HTTP status a JSON-RPC error code travels with at this era."""
    return _STATUS.get(code, 200)


async def serve_modern(ctx: GatewayContext, request: Request, message: RpcMessage) -> Response:
    """Answer one per-request-era message; raises :class:`RpcError` (its ``http_status`` is the caller's to map)."""
    if not message.is_request:
        return Response(status_code=202)
    rid = message.id
    meta = _envelope(message, rid)
    _check_headers(request, message, meta, rid)
    version = meta[PROTOCOL_VERSION_META]
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"_meta.{PROTOCOL_VERSION_META} must be a string", request_id=rid)
    if version not in MODERN_VERSIONS:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            request_id=rid,
            data={"supported": list(PROTOCOL_VERSIONS), "requested": version},
        )
    if message.method == "server/discover":
        discover = {"supportedVersions": list(MODERN_VERSIONS), "capabilities": _CAPABILITIES, **_cache_hints()}
        return JSONResponse(result_body(rid, _finish(discover)))
    if message.method == "tools/list":
        return JSONResponse(result_body(rid, _finish({"tools": list_tools(ctx.manifest), **_cache_hints()})))
    if message.method == "tools/call":
        options = CallOptions(fly=_wants_fly(meta, rid), task_id=None, cancel_on_disconnect=True, finish=_finish)
        return await call_tool(ctx, request, message, options)
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {message.method} (protocol {version})", request_id=rid)


def _envelope(message: RpcMessage, rid: Any) -> Mapping[str, Any]:
    meta = message.params.get("_meta")
    if not isinstance(meta, Mapping):
        raise RpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {PROTOCOL_VERSION_META!r} and {CLIENT_CAPABILITIES_META!r}",
            request_id=rid,
        )
    missing = [key for key in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if key not in meta]
    if missing:
        raise RpcError(
            INVALID_PARAMS, f"params._meta is missing the envelope key(s): {', '.join(missing)}", request_id=rid
        )
    return meta


def _check_headers(request: Request, message: RpcMessage, meta: Mapping[str, Any], rid: Any) -> None:
    for header in _ROUTING_HEADERS:
        if len(request.headers.getlist(header)) > 1:
            raise RpcError(HEADER_MISMATCH, f"{header} header appears more than once", request_id=rid)
    version = request.headers.get(VERSION_HEADER)
    if version is None or version != meta[PROTOCOL_VERSION_META]:
        raise RpcError(
            HEADER_MISMATCH,
            f"{VERSION_HEADER} header {version!r} does not match _meta.{PROTOCOL_VERSION_META} "
            f"{meta[PROTOCOL_VERSION_META]!r}",
            request_id=rid,
        )
    if request.headers.get(METHOD_HEADER) != message.method:
        raise RpcError(
            HEADER_MISMATCH,
            f"{METHOD_HEADER} header {request.headers.get(METHOD_HEADER)!r} does not match the method "
            f"{message.method!r}",
            request_id=rid,
        )
    name = message.params.get("name")
    if message.method == "tools/call" and name is not None and _decoded(request.headers.get(NAME_HEADER)) != name:
        raise RpcError(
            HEADER_MISMATCH,
            f"{NAME_HEADER} header {request.headers.get(NAME_HEADER)!r} does not match the tool name {name!r}",
            request_id=rid,
        )


def _decoded(value: str | None) -> str | None:
    """A header value, ``=?base64?<b64>?=`` unwrapped (how a client sends a name that is not plain ASCII)."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[len("=?base64?") : -2], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _wants_fly(meta: Mapping[str, Any], rid: Any) -> bool:
    level = meta.get(LOG_LEVEL_META)
    if level is None:
        return False
    if level not in LOG_LEVELS:
        expected = ", ".join(LOG_LEVELS)
        raise RpcError(
            INVALID_PARAMS, f"_meta.{LOG_LEVEL_META} must be one of {expected}, got {level!r}", request_id=rid
        )
    return LOG_LEVELS.index(str(level)) <= LOG_LEVELS.index("info")


def _cache_hints() -> dict[str, Any]:
    return {"ttlMs": LIST_TTL_MS, "cacheScope": "private"}


def _finish(result: dict[str, Any]) -> dict[str, Any]:
    meta = result.get("_meta")
    stamp = {SERVER_INFO_META: {"name": "asya-gateway", "version": VERSION}}
    return {**result, "resultType": "complete", "_meta": {**meta, **stamp} if isinstance(meta, dict) else stamp}
