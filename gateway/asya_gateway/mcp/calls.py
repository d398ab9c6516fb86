"""``tools/call`` (GW-MCP-6 .. GW-MCP-9): create the flow's task, wait for it, answer the result.

The arguments (default ``{}``, an object) are checked against the flow's ``input_schema`` (a failure is a tool
result with ``isError: true``, ``invalid arguments: <path>: <reason>``); the task is created exactly as
``POST /api/v1/mesh/?flow=<tool>`` with ``payload = arguments`` (a creation failure is ``dispatch failed: <reason>``),
then followed (``asya_gateway.follow``) until it is terminal or paused, for at most the gateway's long-response limit
(``sse_max_seconds``, 840 s by default, GW-MCP-8), after which the follower ends and the call answers the timeout
result.

With ``text/event-stream`` in ``Accept`` the answer is an SSE stream (GW-MCP-9): ``notifications/progress`` each
time ``progress_percent`` strictly increases (only when the request's ``_meta.progressToken`` is set), each FLY
value as ``notifications/message`` (logger ``asya.fly``) unless the session's level is above ``info``, a
``:keepalive`` comment after ``sse_keepalive`` s of silence, then the JSON-RPC response, and the stream closes.
Otherwise the answer is one JSON response after the wait.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from asya.envelope import dumps
from asya_gateway.context import GatewayContext
from asya_gateway.creation import DispatchError, start_task
from asya_gateway.follow import follow_task
from asya_gateway.jsonrpc import INVALID_PARAMS, RpcError, RpcMessage, result_body
from asya_gateway.mcp.sessions import LOG_LEVELS, McpSession
from asya_gateway.mcp.tools import text_result, tool_result
from asya_gateway.sse import KEEPALIVE, SSE_HEADERS
from asya_gateway.validation import CreateBody, resolve_target, schema_violation
from asya_gateway.waiting import ends_wait

__all__ = ["call_tool"]


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


async def call_tool(ctx: GatewayContext, request: Request, message: RpcMessage, session: McpSession) -> Response:
    rid = message.id
    params = message.params
    name = params.get("name")
    flow = ctx.manifest.flows.get(name) if isinstance(name, str) else None
    if flow is None or not flow.mcp:
        raise RpcError(INVALID_PARAMS, f"unknown tool: {name}", request_id=rid)
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "arguments must be an object", request_id=rid)
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    assert isinstance(name, str)
    target = resolve_target({"flow": name}, ctx.manifest)
    schema = flow.input_schema if flow.input_schema is not None else {"type": "object"}
    violation = schema_violation(arguments, schema)
    if violation is not None:
        return JSONResponse(result_body(rid, text_result(f"invalid arguments: {violation}", is_error=True)))
    try:
        created = await start_task(ctx, target, CreateBody(payload=arguments, headers={}, timeout=None))
    except DispatchError as exc:
        text = f"dispatch failed: {exc.reason}"
        task = None if exc.status == 404 else exc.task_id  # a 404 removed the task again
        return JSONResponse(result_body(rid, text_result(text, is_error=True, task_id=task)))
    task_id = str(created["id"])
    fly_on = session.log_level not in LOG_LEVELS or LOG_LEVELS.index(session.log_level) <= LOG_LEVELS.index("info")
    frames = _frames(ctx, task_id, rid, token=token, fly=fly_on)
    if _wants_stream(request):
        return StreamingResponse(_sse(frames), headers=SSE_HEADERS)
    last: dict[str, Any] = {}
    async for frame in frames:
        if frame is not None and "id" in frame:
            last = frame
    return JSONResponse(last)


async def _sse(frames: AsyncIterator[dict[str, Any] | None]) -> AsyncIterator[str]:
    async for frame in frames:
        yield KEEPALIVE if frame is None else f"event: message\ndata: {dumps(frame)}\n\n"


async def _frames(
    ctx: GatewayContext, task_id: str, rid: Any, *, token: Any, fly: bool
) -> AsyncIterator[dict[str, Any] | None]:
    """The JSON-RPC messages of one call (``None``: nothing to say for a while), the response last."""
    last_status: Mapping[str, Any] = {"status": "pending"}
    progress = 0.0
    async for event in follow_task(ctx, task_id):
        if event.name == "keepalive":
            yield None
            continue
        if event.name == "fly":
            if fly:
                data = {"task_id": task_id, "actor": event.data.get("actor"), "payload": event.data.get("payload")}
                yield _notification("notifications/message", {"level": "info", "logger": "asya.fly", "data": data})
            continue
        last_status = event.data
        percent = event.data.get("progress_percent")
        if token is not None and isinstance(percent, int | float) and percent > progress:
            progress = float(percent)
            label = ": ".join(str(event.data[k]) for k in ("current_actor", "step") if event.data.get(k))
            params = {"progressToken": token, "progress": progress, "total": 100, "message": label}
            yield _notification("notifications/progress", params)
        if ends_wait(event):
            break
    yield result_body(rid, tool_result(task_id, last_status))


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
