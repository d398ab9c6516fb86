"""``POST /mcp`` and ``DELETE /mcp``: MCP over Streamable HTTP (GW-MCP-1..9), stateless per request.

Each request is one JSON-RPC message (``asya_gateway.jsonrpc``); state lives in the table (session items,
``asya_gateway.mcp.sessions``) or in the request itself, so any gateway instance (any Lambda container) serves any
request. Two eras are served (``asya_gateway.mcp.versions``):

- ``2026-07-28``, the per-request era (``asya_gateway.mcp.modern``): a request with the era's envelope or header, or
  ``server/discover``; no session, no handshake. The ``mcp`` 2.x client reaches it by its ``server/discover`` probe.
- the handshake era (GW-MCP-1): ``2025-11-25``, ``2025-06-18``, ``2025-03-26``, ``2024-11-05``. ``initialize``
  answers the requested version when it is one of these, else ``2025-11-25`` (a handshake never lands on the
  per-request era). A request whose ``MCP-Protocol-Version`` header names a version not served answers 400 with
  -32600.
- Sessions (GW-MCP-2): ``initialize`` answers ``Mcp-Session-Id``; every later request needs it (missing: 400
  -32600 ``Mcp-Session-Id header required``; unknown or expired: 404 -32600, initialize again). ``DELETE /mcp`` ends
  it (204). Notifications and client responses answer 202 with no body (GW-MCP-3);
  ``notifications/cancelled`` first checks the session, then cancels the named call's task
  (``asya_gateway.mcp.cancel``).
- Methods (GW-MCP-4): ``initialize``, ``ping``, ``tools/list``, ``tools/call`` (``asya_gateway.mcp.calls``),
  ``logging/setLevel``; anything else -32601.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya_gateway.auth import extract_credential
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OVERLOADED,
    RpcError,
    RpcMessage,
    error_body,
    overload_rpc_error,
    read_message,
    result_body,
)
from asya_gateway.mcp.calls import CallOptions, call_tool
from asya_gateway.mcp.cancel import call_task_id, cancel_call
from asya_gateway.mcp.modern import http_status, serve_modern
from asya_gateway.mcp.sessions import LOG_LEVELS, McpSession, SessionStore
from asya_gateway.mcp.tools import list_tools
from asya_gateway.mcp.versions import (
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    PROTOCOL_VERSIONS,
    SESSION_HEADER,
    VERSION_HEADER,
    is_modern_request,
)
from asya_gateway.principal import caller_principal
from asya_gateway.version import VERSION

__all__ = ["LOG_LEVELS", "PROTOCOL_VERSIONS", "mcp_endpoint"]

_log = logging.getLogger("asya_gateway.mcp")


def _error(exc: RpcError) -> JSONResponse:
    body = error_body(exc.code, exc.message, exc.request_id, exc.data)
    return JSONResponse(body, status_code=exc.http_status, headers=exc.headers)


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
    except RpcError as exc:
        if request.method == "POST" and request.headers.get(VERSION_HEADER) in MODERN_VERSIONS:
            exc.http_status = http_status(exc.code)  # e.g. params that are not an object: 400 at 2026-07-28
        return _error(exc)
    if is_modern_request(message.method, message.params, request.headers):
        try:
            return await _guarded(ctx, serve_modern(ctx, request, message), message.id)
        except RpcError as exc:
            if exc.code != OVERLOADED:  # an overload keeps its 429/503 (GW-OVL-3)
                exc.http_status = http_status(exc.code)
            return _error(exc)
    try:
        return await _guarded(ctx, _dispatch(ctx, sessions, request, message), message.id)
    except RpcError as exc:
        return _error(exc)


async def _guarded(ctx: GatewayContext, answer: Awaitable[Response], rid: Any) -> Response:
    """An unexpected failure is -32603 ``internal error`` (logged), never a traceback on the wire; AWS throttling or
    unavailability is the overload error with ``Retry-After`` (GW-OVL-3)."""
    try:
        return await answer
    except RpcError:
        raise
    except Exception as exc:
        overload = overload_rpc_error(exc, ctx.config.retry_after_seconds, rid)
        if overload is not None:
            _log.warning("MCP request refused (overload): %s", exc)
            raise overload from None
        _log.exception("MCP request failed")
        raise RpcError(INTERNAL_ERROR, "internal error", request_id=rid) from None


async def _dispatch(ctx: GatewayContext, sessions: SessionStore, request: Request, message: RpcMessage) -> Response:
    if not message.is_request:
        if message.method == "notifications/cancelled":
            session = await _session(ctx, sessions, request, None)
            await cancel_call(ctx, session.id, message.params)
        return Response(status_code=202)
    rid = message.id
    if message.method == "initialize":
        return await _initialize(ctx, sessions, request, message)
    version = request.headers.get(VERSION_HEADER)
    if version is not None and version not in HANDSHAKE_VERSIONS:
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
        fly = session.log_level not in LOG_LEVELS or LOG_LEVELS.index(session.log_level) <= LOG_LEVELS.index("info")
        options = CallOptions(
            fly=fly, task_id=call_task_id(session.id, rid), cancel_on_disconnect=False, finish=_unchanged
        )
        return await call_tool(ctx, request, message, options)
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {message.method}", request_id=rid)


def _unchanged(result: dict[str, Any]) -> dict[str, Any]:
    return result


async def _initialize(ctx: GatewayContext, sessions: SessionStore, request: Request, message: RpcMessage) -> Response:
    principal = caller_principal(ctx.manifest.gateway.auth, extract_credential(request.headers))
    requested = message.params.get("protocolVersion")
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]
    session = await ctx.call(sessions.create, str(version), principal)
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
    principal = caller_principal(ctx.manifest.gateway.auth, extract_credential(request.headers))
    if session is None or not hmac.compare_digest(session.principal, principal):  # GW-EDGE-9
        raise RpcError(
            INVALID_REQUEST, "session not found or expired: initialize again", http_status=404, request_id=rid
        )
    return session
