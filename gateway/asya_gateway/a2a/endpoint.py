"""``POST /a2a/``: A2A JSON-RPC (GW-A2A-3), in two dialects chosen by the method name.

- ``tasks/signal {id, event, data?}``, this gateway's own method: a signal to the task (GW-SIGNAL-1..4);
- A2A 0.3 (the spec's): ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``; ``tasks/pushNotificationConfig/*`` answer -32003 (GW-A2A-3).
- A2A 1.0 (the ``a2a-sdk`` 1.x client's): ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
  ``SubscribeToTask`` with ProtoJSON shapes (``asya_gateway.a2a.v1``); the push config methods answer -32003. A
  1.0 ``SubscribeToTask`` starts with the Task (1.0's rule, where 0.3 starts with a status update) and answers
  -32004 for a terminal task, as 1.0 requires.

Anything else is -32601. Every JSON-RPC error, parse and framing errors included, is answered with HTTP 200
(GW-A2A-3); a body over 5 MiB keeps its 413. The A2A task id is the mesh task id and the context id is stored on the
task (GW-A2A-6), so a restart loses nothing. Waits and streams follow the task with
``asya_gateway.follow`` for at most the gateway's long-response limit (``sse_max_seconds``, 840 s).

A message with ``taskId`` (GW-A2A-7): unknown -32001; a task that is not paused, or has no stored envelope yet,
-32004; a paused task is resumed (GW-RESUME-3, ``asya_gateway.routes.resume.resume_paused``) with the message's
payload minus ``a2a`` as input (an input its pause fields refuse is -32602), and the answer is that task, as for a
new message (blocking waits for it to end or pause again).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from asya import headers as hdr
from asya.envelope import dumps
from asya.store import TaskExistsError, is_storable_id
from asya_gateway.a2a import v1
from asya_gateway.a2a.card import a2a_skills
from asya_gateway.a2a.mapping import (
    STATES,
    A2AParamsError,
    artifact_update,
    fly_artifact,
    message_payload,
    result_artifact,
    status_update,
    task_object,
)
from asya_gateway.auth import extract_credential
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.creation import DispatchError, start_task
from asya_gateway.errors import HttpError
from asya_gateway.follow import TERMINAL_STATUSES, follow_task
from asya_gateway.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    OVERLOADED,
    RpcError,
    RpcMessage,
    error_body,
    overload_rpc_error,
    read_message,
    result_body,
)
from asya_gateway.principal import is_visible, owner_checks
from asya_gateway.routes.resume import resume_paused
from asya_gateway.routes.signal import deliver_signal
from asya_gateway.sse import KEEPALIVE, SSE_HEADERS
from asya_gateway.validation import CreateBody, resolve_target, schema_violation
from asya_gateway.waiting import ends_wait, status_of

__all__ = ["TASK_NOT_CANCELABLE", "TASK_NOT_FOUND", "UNSUPPORTED_OPERATION", "a2a_endpoint", "resume_task"]

_log = logging.getLogger("asya_gateway.a2a")

TASK_NOT_FOUND: Final = -32001
TASK_NOT_CANCELABLE: Final = -32002
PUSH_NOT_SUPPORTED: Final = -32003
UNSUPPORTED_OPERATION: Final = -32004


async def a2a_endpoint(request: Request) -> Response:
    ctx = context_of(request)
    try:
        message = await read_message(request)
        if not message.is_request:
            raise RpcError(-32600, "a notification or response is not served on /a2a/", request_id=message.id)
        return await _dispatch(ctx, message, caller=extract_credential(request.headers) or "")
    except RpcError as exc:
        # GW-A2A-3: JSON-RPC errors travel with HTTP 200, framing errors included; only a body over the limit keeps
        # its 413, and an overload its 429/503 with Retry-After (GW-OVL-3) (authentication failures never get here:
        # 401, GW-AUTH-7)
        status = exc.http_status if exc.http_status == 413 or exc.code == OVERLOADED else 200
        body = error_body(exc.code, exc.message, exc.request_id, exc.data if exc.code == OVERLOADED else None)
        return JSONResponse(body, status_code=status, headers=exc.headers)


class _Call:
    """One request in its dialect: the 0.3 method it maps to, and how its results are written."""

    def __init__(self, message: RpcMessage) -> None:
        raw = message.method or ""
        self.rid = message.id
        self.modern = raw in v1.METHODS or raw in v1.PUSH_METHODS
        self.method = v1.METHODS.get(raw, raw)
        self.push = raw in v1.PUSH_METHODS or raw.startswith("tasks/pushNotificationConfig/")
        self.params = message.params
        if self.modern and isinstance(self.params.get("message"), dict):
            self.params = {**self.params, "message": v1.message_from_v1(self.params["message"])}

    def task(self, task: dict[str, Any]) -> dict[str, Any]:
        return result_body(self.rid, v1.task_to_v1(task) if self.modern else task)

    def sent(self, task: dict[str, Any]) -> dict[str, Any]:
        return result_body(self.rid, {"task": v1.task_to_v1(task)} if self.modern else task)

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        return result_body(self.rid, v1.stream_response(event) if self.modern else event)

    def blocking(self) -> bool:
        configuration = self.params.get("configuration")
        if not isinstance(configuration, dict):
            return True
        if self.modern:
            return configuration.get("returnImmediately") is not True
        return configuration.get("blocking", True) is not False


async def _dispatch(ctx: GatewayContext, message: RpcMessage, *, caller: str = "") -> Response:
    call = _Call(message)
    method, rid = call.method, call.rid
    try:
        if method in ("message/send", "message/stream"):
            return await _send(ctx, call, stream=method == "message/stream", caller=caller)
        if method == "tasks/get":
            return JSONResponse(call.task(await _task(ctx, _task_id(call))))
        if method == "tasks/cancel":
            return JSONResponse(call.task(await _cancel(ctx, _task_id(call), rid)))
        if method == "tasks/signal":
            return JSONResponse(result_body(rid, await _signal(ctx, call)))
        if method == "tasks/resubscribe":
            view = await _view(ctx, _task_id(call), rid)
            if call.modern and view["status"] in TERMINAL_STATUSES:
                state = STATES[view["status"]]
                raise RpcError(UNSUPPORTED_OPERATION, f"task {view['id']} is in terminal state: {state}")
            return StreamingResponse(_sse(call, _resubscribe(ctx, view, modern=call.modern)), headers=SSE_HEADERS)
    except A2AParamsError as exc:
        raise RpcError(INVALID_PARAMS, str(exc), request_id=rid) from None
    except RpcError as exc:
        exc.request_id = rid
        raise
    except Exception as exc:
        overload = overload_rpc_error(exc, ctx.config.retry_after_seconds, rid)
        if overload is not None:
            _log.warning("A2A %s refused (overload): %s", method, exc)
            raise overload from None
        _log.exception("A2A %s failed", method)
        raise RpcError(INTERNAL_ERROR, "internal error", request_id=rid) from None
    if call.push:
        raise RpcError(PUSH_NOT_SUPPORTED, "push notifications are not supported", request_id=rid)
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {message.method}", request_id=rid)


def _task_id(call: _Call) -> str:
    task_id = call.params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise A2AParamsError("params.id must be a non-empty string")
    return task_id


async def _view(ctx: GatewayContext, task_id: str, rid: Any) -> dict[str, Any]:
    view = await ctx.call(ctx.store.get_task, task_id) if is_storable_id(task_id) else None
    if view is None or not is_visible(ctx.manifest.gateway.auth, view):  # another's task is none (GW-EDGE-5)
        raise RpcError(TASK_NOT_FOUND, f"task not found: {task_id}", request_id=rid)
    return view


def _context_id(view: Mapping[str, Any]) -> str:
    return str(view.get("context_id") or view["id"])


def _task_of(view: Mapping[str, Any]) -> dict[str, Any]:
    return task_object(str(view["id"]), _context_id(view), view["data"], flow=view.get("flow"))


async def _task(ctx: GatewayContext, task_id: str) -> dict[str, Any]:
    return _task_of(await _view(ctx, task_id, None))


async def _cancel(ctx: GatewayContext, task_id: str, rid: Any) -> dict[str, Any]:
    if owner_checks(ctx.manifest.gateway.auth):
        await _view(ctx, task_id, rid)
    outcome = await ctx.call(ctx.store.cancel, task_id) if is_storable_id(task_id) else "not_found"
    if outcome == "not_found":
        raise RpcError(TASK_NOT_FOUND, f"task not found: {task_id}", request_id=rid)
    if outcome == "terminal":
        status = (await _view(ctx, task_id, rid))["status"]
        raise RpcError(TASK_NOT_CANCELABLE, f"task cannot be canceled (status: {status})", request_id=rid)
    return await _task(ctx, task_id)


async def _signal(ctx: GatewayContext, call: _Call) -> dict[str, Any]:
    """``tasks/signal {id, event, data?}`` (GW-SIGNAL-1..4): the REST signal's answer; its refusals as JSON-RPC
    errors: 404 -32001, 409 -32004, 400 -32602, 500 -32603."""
    task_id, rid = _task_id(call), call.rid
    await _view(ctx, task_id, rid)  # another subject's task is none (GW-EDGE-5)
    try:
        return await deliver_signal(ctx, task_id, call.params.get("event"), call.params.get("data"))
    except HttpError as exc:
        if exc.status == 404:
            raise RpcError(TASK_NOT_FOUND, f"task not found: {task_id}", request_id=rid) from None
        if exc.status == 409:
            raise RpcError(UNSUPPORTED_OPERATION, exc.message, request_id=rid) from None
        if exc.status == 400:
            raise A2AParamsError(exc.message) from None
        raise RpcError(INTERNAL_ERROR, exc.message, request_id=rid) from None


def _skill(ctx: GatewayContext, params: Mapping[str, Any]) -> str:
    """GW-A2A-4."""
    skills = list(a2a_skills(ctx.manifest))
    metadata = params.get("metadata")
    wanted = metadata.get("skill") if isinstance(metadata, dict) else None
    if wanted is not None:
        if wanted not in skills:
            raise A2AParamsError(f"unknown skill: {wanted}")
        return str(wanted)
    if not skills:
        raise A2AParamsError("no A2A skills are configured")
    if len(skills) > 1:
        raise A2AParamsError(f"several skills are available; set params.metadata.skill to one of: {', '.join(skills)}")
    return skills[0]


async def resume_task(
    ctx: GatewayContext, view: Mapping[str, Any], payload: Mapping[str, Any], *, rid: Any = None
) -> dict[str, Any]:
    """Resume a paused task with ``payload`` minus ``a2a`` as input (GW-A2A-7, GW-RESUME-3); the REST resume's
    refusals become JSON-RPC errors: 404 -32001, 409 -32004, 400 -32602, 500 -32603."""
    task_id = str(view["id"])
    given = {key: value for key, value in payload.items() if key != "a2a"}
    try:
        return await resume_paused(ctx, task_id, given)
    except HttpError as exc:
        if exc.status == 404:
            raise RpcError(TASK_NOT_FOUND, f"task not found: {task_id}", request_id=rid) from None
        if exc.status == 409:
            message = f"task {task_id} is not waiting for input: {exc.message}"
            raise RpcError(UNSUPPORTED_OPERATION, message, request_id=rid) from None
        if exc.status == 400:
            raise A2AParamsError(f"message: {exc.message}") from None
        raise RpcError(INTERNAL_ERROR, exc.message, request_id=rid) from None


async def _send(ctx: GatewayContext, call: _Call, *, stream: bool, caller: str = "") -> Response:
    params, rid = call.params, call.rid
    user = params.get("message")
    payload, history = message_payload(user)
    assert isinstance(user, dict)
    existing = user.get("taskId")
    if existing:
        view = await _view(ctx, str(existing), rid)
        if view["status"] != "paused":
            raise RpcError(
                UNSUPPORTED_OPERATION,
                f"task {existing} is not waiting for input (status: {view['status']})",
                request_id=rid,
            )
        await resume_task(ctx, view, payload, rid=rid)
        return await _answer(
            ctx, call, str(existing), _context_id(view), view.get("flow"), stream=stream, status="running"
        )
    flow = _skill(ctx, params)
    target = resolve_target({"flow": flow}, ctx.manifest)
    if target.input_schema is not None:
        violation = schema_violation(payload, target.input_schema)
        if violation is not None:
            raise A2AParamsError(f"payload does not match input_schema: {violation}")
    context_id = str(user.get("contextId") or uuid.uuid4())
    task_id = message_task_id(caller, user.get("messageId"))
    retried = await _retried(ctx, task_id, flow, payload)
    if retried is not None:
        return await _answer(ctx, call, task_id, _context_id(retried), flow, stream=stream)
    payload["a2a"] = {"task": {"id": task_id, "context_id": context_id, "history": [history]}}
    extra = {hdr.A2A_TASK_ID: task_id, hdr.A2A_CONTEXT_ID: context_id}
    try:
        await start_task(
            ctx,
            target,
            CreateBody(payload=payload, headers={}, timeout=None),
            extra_headers=extra,
            context_id=context_id,
            task_id=task_id,
        )
    except TaskExistsError:
        # the same message sent twice at once: the other send created the task, follow it
        retried = await _retried(ctx, task_id, flow, payload)
        if retried is None:
            raise
        context_id = _context_id(retried)
    except DispatchError as exc:
        raise RpcError(INTERNAL_ERROR, f"dispatch failed: {exc.reason}", request_id=rid) from None
    return await _answer(ctx, call, task_id, context_id, flow, stream=stream)


def message_task_id(caller: str, message_id: Any) -> str:
    """The task id of a message (GW-CREATE-R3-6): derived from the caller's credential and the client's ``messageId``,
    so a message sent again after a cut connection names the same task; a fresh UUID4 without a ``messageId``."""
    if not isinstance(message_id, str) or not message_id:
        return str(uuid.uuid4())
    digest = hashlib.sha256(f"a2a\n{caller}\n{message_id}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


async def _retried(ctx: GatewayContext, task_id: str, flow: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task an earlier send of this same message created (same flow, same input apart from ``a2a``), else
    ``None``. A message id reused for another message (A2A forbids it) answers -32602."""
    existing: dict[str, Any] | None = await ctx.call(ctx.store.get_task, task_id, enforce_deadline=False)
    if existing is None:
        return None
    before = existing.get("payload")
    same_input = isinstance(before, dict) and _user_input(before) == _user_input(payload)
    if existing.get("flow") != flow or not same_input:
        raise A2AParamsError("message.messageId was already used for another message")
    return existing


def _user_input(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "a2a"}


async def _answer(
    ctx: GatewayContext,
    call: _Call,
    task_id: str,
    context_id: str,
    flow: Any,
    *,
    stream: bool,
    status: str = "pending",
) -> Response:
    """The answer to ``message/send``/``message/stream`` for ``task_id``, just created (``pending``) or just
    resumed (``running``)."""
    if stream:
        submitted = {"status": status, "progress_percent": 0.0, "timestamp": None}
        first = task_object(task_id, context_id, submitted, flow=flow)
        return StreamingResponse(_sse(call, _live(ctx, task_id, context_id, first=first)), headers=SSE_HEADERS)
    if call.blocking():
        async for event in follow_task(ctx, task_id):
            if ends_wait(event):
                break
    return JSONResponse(call.sent(await _task(ctx, task_id)))


async def _sse(call: _Call, events: AsyncIterator[dict[str, Any] | None]) -> AsyncIterator[str]:
    async for event in events:
        yield KEEPALIVE if event is None else f"data: {dumps(call.event(event))}\n\n"


async def _resubscribe(
    ctx: GatewayContext, view: Mapping[str, Any], *, modern: bool
) -> AsyncIterator[dict[str, Any] | None]:
    """GW-A2A-13: the current state (1.0: the Task), then live events only."""
    task_id, context_id = str(view["id"]), _context_id(view)
    data = view["data"]
    if view["status"] in TERMINAL_STATUSES:
        if view["status"] == "succeeded":
            yield artifact_update(task_id, context_id, result_artifact(data), append=False, last_chunk=True)
        yield status_update(task_id, context_id, data, final=True)
        return
    if modern:
        yield _task_of(view)
    else:
        yield status_update(task_id, context_id, data, final=view["status"] == "paused")
    if view["status"] == "paused":
        return
    async for event in _live(ctx, task_id, context_id, first=None, after=int(view["last_event_id"])):
        yield event


async def _live(
    ctx: GatewayContext,
    task_id: str,
    context_id: str,
    *,
    first: dict[str, Any] | None,
    after: int = 0,
) -> AsyncIterator[dict[str, Any] | None]:
    """GW-A2A-11 (1)-(4): the Task, working updates, FLY chunks, then the final events."""
    if first is not None:
        yield first
    fly_sent = False
    label: tuple[Any, ...] | None = None
    catchup = True
    async for event in follow_task(ctx, task_id, after=after):
        if event.name == "keepalive":
            yield None
            continue
        if event.name == "fly":
            artifact = fly_artifact(event.data.get("payload"))
            yield artifact_update(task_id, context_id, artifact, append=fly_sent, last_chunk=False)
            fly_sent = True
            continue
        status, data = status_of(event), event.data
        skip_catchup, catchup = catchup, False
        if ends_wait(event):
            if fly_sent:
                closing = {"artifactId": "fly-stream", "parts": [{"kind": "text", "text": ""}]}
                yield artifact_update(task_id, context_id, closing, append=True, last_chunk=True)
            if status == "succeeded":
                yield artifact_update(task_id, context_id, result_artifact(data), append=False, last_chunk=True)
            yield status_update(task_id, context_id, data, final=True)
            return
        if status != "running" or (skip_catchup and first is None):
            continue
        current = (data.get("current_actor"), data.get("step"), data.get("progress_percent"))
        if current != label:
            label = current
            yield status_update(task_id, context_id, data, final=False)
