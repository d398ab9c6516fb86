"""``POST /mcp`` and ``DELETE /mcp``: MCP over Streamable HTTP (GATEWAY section 11), stateless per request.

Each request is one JSON-RPC message (``asya_gateway.jsonrpc``); state lives in the session item
(``asya_gateway.mcp.sessions``), so any gateway instance (any Lambda container) serves any request.

- Protocol versions (GW-MCP-1): ``2025-11-25`` (the newest the ``mcp`` 2.x client reaches by ``initialize``),
  ``2025-06-18``, ``2025-03-26``, ``2024-11-05``. ``initialize`` answers the requested version when served, else
  the newest. The ``2026-07-28`` stateless era is not served: its probe ``server/discover`` answers -32601, which
  makes the SDK client fall back to ``initialize``. A request whose ``MCP-Protocol-Version`` header names a version
  not served answers 400 with -32600.
- Sessions (GW-MCP-2): ``initialize`` answers ``Mcp-Session-Id``; every later request needs it (missing: 400
  -32600 ``Mcp-Session-Id header required``; unknown or expired: 404 -32600, initialize again). ``DELETE /mcp`` ends
  it (204). Notifications and client responses answer 202 with no body (GW-MCP-3).
- Methods (GW-MCP-4): ``initialize``, ``ping``, ``tools/list``, ``tools/call`` (``asya_gateway.mcp.calls``),
  ``logging/setLevel``; anything else -32601.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya_gateway.context import GatewayContext, context_of
from asya_gateway.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RpcError,
    RpcMessage,
    error_body,
    read_message,
    result_body,
)
from asya_gateway.mcp.calls import call_tool
from asya_gateway.mcp.sessions import LOG_LEVELS, McpSession, SessionStore
from asya_gateway.mcp.tools import list_tools
from asya_gateway.version import VERSION

__all__ = ["LOG_LEVELS", "PROTOCOL_VERSIONS", "mcp_endpoint"]

_log = logging.getLogger("asya_gateway.mcp")

#: Served protocol versions, newest first (GW-MCP-1).
PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"


def _error(exc: RpcError) -> JSONResponse:
    return JSONResponse(error_body(exc.code, exc.message, exc.request_id), status_code=exc.http_status)


async def mcp_endpoint(request: Request) -> Response:
    """``/mcp``: POST a JSON-RPC message, DELETE the session (GET is 405 by routing: no server-initiated stream)."""
    ctx = context_of(request)
    sessions = SessionStore(ctx.store, ctx.clock)
    try:
        if request.method == "DELETE":
            session = await _session(ctx, sessions, request, None)
            await ctx.call(sessions.delete, session.id)
            return Response(status_code=204)
        message = await read_message(request)
        return await _dispatch(ctx, sessions, request, message)
    except RpcError as exc:
        return _error(exc)


async def _dispatch(ctx: GatewayContext, sessions: SessionStore, request: Request, message: RpcMessage) -> Response:
    if not message.is_request:
        return Response(status_code=202)
    rid = message.id
    if message.method == "initialize":
        return await _initialize(ctx, sessions, message)
    if message.method == "server/discover":
        raise RpcError(METHOD_NOT_FOUND, "method not found: server/discover (use initialize)", request_id=rid)
    version = request.headers.get(VERSION_HEADER)
    if version is not None and version not in PROTOCOL_VERSIONS:
        raise RpcError(
            INVALID_REQUEST,
            f"unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(PROTOCOL_VERSIONS)}",
            http_status=400,
            request_id=rid,
        )
    session = await _session(ctx, sessions, request, rid)
    if message.method == "ping":
        return JSONResponse(result_body(rid, {}))
    if message.method == "tools/list":
        return JSONResponse(result_body(rid, {"tools": list_tools(ctx.manifest)}))
    if message.method == "logging/setLevel":
        level = message.params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(
                INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}, got {level!r}", request_id=rid
            )
        await ctx.call(sessions.set_log_level, session.id, str(level))
        return JSONResponse(result_body(rid, {}))
    if message.method == "tools/call":
        try:
            return await call_tool(ctx, request, message, session)
        except RpcError:
            raise
        except Exception:
            _log.exception("tools/call failed")
            raise RpcError(INTERNAL_ERROR, "internal error", request_id=rid) from None
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {message.method}", request_id=rid)


async def _initialize(ctx: GatewayContext, sessions: SessionStore, message: RpcMessage) -> Response:
    requested = message.params.get("protocolVersion")
    version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    session = await ctx.call(sessions.create, str(version))
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}, "logging": {}},
        "serverInfo": {"name": "asya-gateway", "version": VERSION},
    }
    return JSONResponse(result_body(message.id, result), headers={"Mcp-Session-Id": session.id})


async def _session(ctx: GatewayContext, sessions: SessionStore, request: Request, rid: Any) -> McpSession:
    session_id = request.headers.get(SESSION_HEADER)
    if not session_id:
        raise RpcError(INVALID_REQUEST, "Mcp-Session-Id header required", http_status=400, request_id=rid)
    session = await ctx.call(sessions.get, session_id)
    if session is None:
        raise RpcError(
            INVALID_REQUEST, "session not found or expired: initialize again", http_status=404, request_id=rid
        )
    return session
