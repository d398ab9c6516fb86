"""``tools/call`` (GW-MCP-6 .. GW-MCP-9): create the flow's task, wait for it, answer the result.

The arguments (default ``{}``, an object) are checked against the flow's ``input_schema`` (a failure is a tool
result with ``isError: true``, ``invalid arguments: <path>: <reason>``); the task is created exactly as
``POST /api/v1/mesh/?flow=<tool>`` with ``payload = arguments`` (a creation failure is ``dispatch failed: <reason>``),
then followed (``asya_gateway.follow``) until it is terminal or paused, for at most the gateway's long-response limit
(``sse_max_seconds``, 840 s by default, GW-MCP-8), after which the follower ends and the call answers the timeout
result.

With ``text/event-stream`` in ``Accept`` the answer is an SSE stream (GW-MCP-9): ``notifications/progress`` each
time ``progress_percent`` strictly increases (only when the request's ``_meta.progressToken`` is set), each FLY
value as ``notifications/message`` (logger ``asya.fly``) when the caller asked for ``info`` messages
(:attr:`CallOptions.fly`), a ``:keepalive`` comment after ``sse_keepalive`` s of silence, then the JSON-RPC
response, and the stream closes. Otherwise the answer is one JSON response after the wait.

The era decides the rest (:class:`CallOptions`): the task id (handshake era: derived from the session and the
request id, so a ``notifications/cancelled`` can name it, ``asya_gateway.mcp.cancel``), how a result is stamped
(2026-07-28: ``resultType`` and the server info), and what a client that goes away before the response means. At
2026-07-28 closing the response stream is the protocol's cancellation: the task is canceled (GW-CANCEL-1). In the
handshake era a dropped connection is not a cancel: the task runs on and the call stops waiting. A streamed call
sees the close at once when the server reports it (uvicorn, ASGI < 2.4) or at the next write (the keepalive); a JSON
call checks at each keepalive tick.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from asya.envelope import dumps
from asya.store import TaskExistsError
from asya_gateway.context import GatewayContext
from asya_gateway.creation import DispatchError, start_task
from asya_gateway.errors import HttpError
from asya_gateway.follow import follow_task
from asya_gateway.jsonrpc import INVALID_PARAMS, RpcError, RpcMessage, result_body
from asya_gateway.mcp.tools import SIGNAL_TOOL, signals_events, text_result, tool_result
from asya_gateway.principal import is_visible
from asya_gateway.routes.signal import deliver_signal
from asya_gateway.sse import KEEPALIVE, SSE_HEADERS
from asya_gateway.validation import CreateBody, CreateTarget, reference_problem, resolve_target, schema_violation
from asya_gateway.waiting import ends_wait

__all__ = ["CallOptions", "call_tool"]

_log = logging.getLogger("asya_gateway.mcp")


@dataclass(frozen=True, slots=True)
class CallOptions:
    """What the era of a ``tools/call`` decides."""

    #: send each FLY value as ``notifications/message``
    fly: bool
    #: the id to create the task under (``None``: a fresh UUID4); taken already, a fresh one is used instead
    task_id: str | None
    #: a client gone before the response cancels the task (2026-07-28) instead of only ending the wait
    cancel_on_disconnect: bool
    #: the last touch on every tool result (2026-07-28 adds ``resultType`` and the server info)
    finish: Callable[[dict[str, Any]], dict[str, Any]]


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


async def call_tool(ctx: GatewayContext, request: Request, message: RpcMessage, options: CallOptions) -> Response:
    rid = message.id
    params = message.params
    name = params.get("name")
    if name == SIGNAL_TOOL and signals_events(ctx.manifest):
        return JSONResponse(result_body(rid, options.finish(await _signal(ctx, params.get("arguments")))))
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
    violation = reference_problem(arguments, "$") or schema_violation(arguments, schema)
    if violation is not None:
        invalid = text_result(f"invalid arguments: {violation}", is_error=True)
        return JSONResponse(result_body(rid, options.finish(invalid)))
    try:
        task_id = await _create(ctx, target, arguments, options.task_id)
    except DispatchError as exc:
        text = f"dispatch failed: {exc.reason}"
        task = None if exc.status == 404 else exc.task_id  # a 404 removed the task again
        return JSONResponse(result_body(rid, options.finish(text_result(text, is_error=True, task_id=task))))
    frames = _frames(ctx, task_id, rid, token=token, options=options)
    if _wants_stream(request):
        return StreamingResponse(_sse(ctx, task_id, frames, options), headers=SSE_HEADERS)
    return await _json(ctx, request, task_id, frames, options)


async def _signal(ctx: GatewayContext, arguments: object) -> dict[str, Any]:
    """The ``asya.signal`` tool (GW-SIGNAL-1..4): the REST signal's answer as JSON text; a refusal (another
    subject's task is not found, GW-EDGE-8) is an error result with the REST message."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("task_id"), str):
        return text_result("invalid arguments: task_id (a string) and event are required", is_error=True)
    task_id = arguments["task_id"]
    try:
        answer = await deliver_signal(ctx, task_id, arguments.get("event"), arguments.get("data"))
    except HttpError as exc:
        return text_result(exc.message, is_error=True, task_id=task_id if exc.status != 404 else None)
    result = text_result(json.dumps(answer, separators=(",", ":")), is_error=False, task_id=task_id)
    result["structuredContent"] = answer
    return result


async def _create(ctx: GatewayContext, target: CreateTarget, arguments: dict[str, Any], task_id: str | None) -> str:
    body = CreateBody(payload=arguments, headers={}, timeout=None)
    try:
        created = await start_task(ctx, target, body, task_id=task_id)
    except TaskExistsError:
        assert task_id is not None  # a fresh id is never taken
        # the session and request id are the call's idempotency key (GW-CREATE-R3-6, no extra write): the same call sent
        # again after a cut connection follows the task it created
        existing = await ctx.call(ctx.store.get_task, task_id, enforce_deadline=False)
        # another subject's task under this id is not this call's (GW-EDGE-7): the call runs under a fresh id
        mine = existing if existing is not None and is_visible(ctx.manifest.gateway.auth, existing) else None
        if mine is not None and mine.get("flow") == target.flow and mine.get("payload") == arguments:
            return task_id
        # a client that reused a request id in its session for another call (MCP forbids it): the call still runs,
        # under a fresh id that its cancel notification cannot name
        _log.warning("tools/call: task id %s taken (request id reused in its session); using a fresh id", task_id)
        created = await start_task(ctx, target, body)
    return str(created["id"])


async def _json(
    ctx: GatewayContext,
    request: Request,
    task_id: str,
    frames: AsyncIterator[dict[str, Any] | None],
    options: CallOptions,
) -> Response:
    last: dict[str, Any] = {}
    async for frame in frames:
        if frame is None:
            if await request.is_disconnected():
                await _abandoned(ctx, task_id, options)
                return Response(status_code=204)  # nobody reads it
        elif "id" in frame:
            last = frame
    return JSONResponse(last)


async def _sse(
    ctx: GatewayContext, task_id: str, frames: AsyncIterator[dict[str, Any] | None], options: CallOptions
) -> AsyncIterator[str]:
    answered = False
    try:
        async for frame in frames:
            answered = frame is not None and "id" in frame
            yield KEEPALIVE if frame is None else f"event: message\ndata: {dumps(frame)}\n\n"
    except (anyio.get_cancelled_exc_class(), GeneratorExit):
        if not answered:
            with anyio.CancelScope(shield=True):
                await _abandoned(ctx, task_id, options)
        raise


async def _abandoned(ctx: GatewayContext, task_id: str, options: CallOptions) -> None:
    """The client went away before the response: 2026-07-28 cancels the task (GW-CANCEL-1), else it runs on. A
    stream cut by the server's own shutdown (the app drains, :func:`asya_gateway.app.drain`) is not the client's
    cancel: the task runs on."""
    if ctx.draining.is_set():
        _log.info("tools/call of task %s: cut by the gateway's shutdown; the task runs on", task_id)
        return
    if not options.cancel_on_disconnect:
        _log.info("tools/call of task %s: the client went away; the task runs on", task_id)
        return
    outcome = await ctx.call(ctx.store.cancel, task_id)
    _log.info("tools/call of task %s: the client closed the stream (cancel): %s", task_id, outcome)


async def _frames(
    ctx: GatewayContext, task_id: str, rid: Any, *, token: Any, options: CallOptions
) -> AsyncIterator[dict[str, Any] | None]:
    """The JSON-RPC messages of one call (``None``: nothing to say for a while), the response last."""
    last_status: Mapping[str, Any] = {"status": "pending"}
    progress = 0.0
    async for event in follow_task(ctx, task_id):
        if event.name == "keepalive":
            yield None
            continue
        if event.name == "fly":
            if options.fly:
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
    yield result_body(rid, options.finish(tool_result(task_id, last_status)))


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
