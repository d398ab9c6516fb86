"""Task routes: create (GATEWAY section 3), view (4), list (5), cancel (6).

Create (GW-CREATE-7): validate, make a UUID4, build headers (client headers, trace context, ``x-asya-flow`` and
``x-asya-progress`` for a flow, ``x-asya-gateway-url`` when a callback URL is configured), compute ``deadline_at``,
write the record with event 1, arm the deadline timer (GW-BACK-1, ``asya_gateway.timers``), then send the envelope to
the first actor. A missing queue deletes the record again (404, GW-CREATE-8); any other send failure marks the task
``failed`` with ``dispatch failed: <AWS error code>`` and answers 500.

The timer is armed before the envelope is sent, not after (GW-CREATE-7 lists it last): a failed timer send then
fails a task that nothing has started, in the same way as a failed envelope send (``failed`` with ``dispatch failed:
<AWS error code>``, 500), so a client is never answered 201 for a task whose deadline nothing would enforce. A timer
armed for a task whose first send then fails finds the task failed (or deleted) and drops itself.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import headers as hdr
from asya.envelope import Envelope, Route, Status
from asya.exceptions import SerializationError
from asya.store import ListQueryError, StatusUpdate, is_storable_id
from asya.timeutil import format_ts
from asya.transport import TransportError, UnknownActorError
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.errors import HttpError
from asya_gateway.listing import parse_list_query
from asya_gateway.timers import TimerError
from asya_gateway.tracing import trace_headers
from asya_gateway.validation import CreateBody, CreateTarget, parse_create_body, resolve_target, schema_violation

__all__ = ["NOT_FOUND", "aws_error_code", "create_or_list", "load_view", "task_id_of", "task_item"]

_log = logging.getLogger("asya_gateway.tasks")

NOT_FOUND: Final = "not found"


async def create_or_list(request: Request) -> Response:
    """``/api/v1/mesh`` and ``/api/v1/mesh/`` (GW-GEN-7)."""
    if request.method == "POST":
        return await create_task(request)
    return await list_tasks(request)


async def create_task(request: Request) -> Response:
    ctx = context_of(request)
    body = await read_json_object(request, limit=CREATE_BODY_LIMIT)
    target = resolve_target(request.query_params, ctx.manifest)
    create = parse_create_body(body, user_actors=ctx.manifest.actors)
    if target.input_schema is not None:
        violation = schema_violation(create.payload, target.input_schema)
        if violation is not None:
            raise HttpError(400, f"payload does not match input_schema: {violation}")
    task_id = str(uuid.uuid4())
    now = ctx.clock()
    timeout = create.timeout if create.timeout is not None else target.default_timeout
    deadline_at = None if timeout is None else format_ts(now + timedelta(seconds=timeout))
    headers = _envelope_headers(request, ctx, target, create)
    entry = target.route[0]
    envelope = Envelope(
        id=task_id,
        route=Route(prev=[], curr=entry, next=list(target.route[1:])),
        payload=create.payload,
        headers=headers,
        status=Status(
            phase="pending",
            actor=entry,
            attempt=1,
            max_attempts=1,
            created_at=format_ts(now),
            updated_at=format_ts(now),
            deadline_at=deadline_at,
        ),
    )
    await ctx.call(
        ctx.store.create_task,
        task_id=task_id,
        actor=entry,
        flow=target.flow,
        payload=create.payload,
        deadline_at=deadline_at,
    )
    if deadline_at is not None:
        await _arm_deadline(ctx, task_id, deadline_at)
    await _dispatch(ctx, task_id, entry, envelope)
    answer: dict[str, Any] = {"id": task_id, "status": "pending"}
    if deadline_at is not None:
        answer["deadline_at"] = deadline_at
    return JSONResponse(answer, status_code=201, headers={"Location": f"/api/v1/mesh/{task_id}"})


def _envelope_headers(
    request: Request, ctx: GatewayContext, target: CreateTarget, create: CreateBody
) -> dict[str, Any]:
    headers = dict(create.headers)
    headers.pop(hdr.TRACESTATE, None)
    headers.update(
        trace_headers(request.headers.get(hdr.TRACEPARENT), request.headers.get(hdr.TRACESTATE), create.headers)
    )
    if target.flow is not None:
        headers[hdr.FLOW] = target.flow
        if target.progress is not None:
            headers[hdr.PROGRESS] = target.progress
    callback_url = ctx.manifest.gateway.callback_url
    if callback_url:
        headers[hdr.GATEWAY_URL] = callback_url
    return headers


async def _arm_deadline(ctx: GatewayContext, task_id: str, deadline_at: str) -> None:
    try:
        await ctx.call(ctx.timers.arm, task_id, deadline_at)
    except TimerError as exc:
        _log.error("deadline timer of task %s not armed: %s", task_id, exc)
        update = StatusUpdate(status="failed", error=f"dispatch failed: {exc.code}", envelope_id=task_id)
        await ctx.call(ctx.store.apply_status, task_id, update)
        raise HttpError(500, "failed to dispatch message") from None


async def _dispatch(ctx: GatewayContext, task_id: str, actor: str, envelope: Envelope) -> None:
    try:
        await ctx.call(ctx.transport.send, actor, envelope)
    except UnknownActorError:
        await ctx.call(ctx.store.delete_task, task_id)
        raise HttpError(404, f"actor not found: {actor}") from None
    except (TransportError, SerializationError) as exc:
        code = aws_error_code(exc)
        _log.error("dispatch of task %s to %s failed: %s", task_id, actor, exc)
        update = StatusUpdate(status="failed", error=f"dispatch failed: {code}", envelope_id=task_id)
        await ctx.call(ctx.store.apply_status, task_id, update)
        raise HttpError(500, "failed to dispatch message") from None


def aws_error_code(exc: BaseException) -> str:
    """The AWS error code behind a send failure (``ClientError`` code), else the exception class name."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ClientError):
            code = cause.response.get("Error", {}).get("Code")
            if code:
                return str(code)
        if isinstance(cause, BotoCoreError):
            return type(cause).__name__
        cause = cause.__cause__
    return type(exc).__name__


async def list_tasks(request: Request) -> Response:
    ctx = context_of(request)
    query = parse_list_query(request.query_params)
    try:
        page = await ctx.call(ctx.store.list_tasks, **query)
    except ListQueryError as exc:
        raise HttpError(400, str(exc)) from None
    return JSONResponse(page)


def task_id_of(request: Request) -> str:
    """The ``{id}`` path parameter (GW-GEN-7: any string). An id too long to be a store key names no task: 404 at
    once, since DynamoDB would answer the read with a ``ValidationException`` (a 500) instead of "not found"."""
    task_id: str = request.path_params["task_id"]
    if not is_storable_id(task_id):
        raise HttpError(404, NOT_FOUND)
    return task_id


async def load_view(ctx: GatewayContext, task_id: str) -> dict[str, Any]:
    """The task view after the read-path backstop (GW-TASK-3, GW-BACK-3); 404 when there is no record."""
    view = await ctx.call(ctx.store.get_task, task_id)
    if view is None:
        raise HttpError(404, NOT_FOUND)
    return view


async def task_item(request: Request) -> Response:
    """``/api/v1/mesh/{id}``: GET the view, DELETE to cancel."""
    if request.method == "DELETE":
        return await cancel_task(request)
    return await get_task(request)


async def get_task(request: Request) -> Response:
    ctx = context_of(request)
    return JSONResponse(await load_view(ctx, task_id_of(request)))


async def cancel_task(request: Request) -> Response:
    """GW-CANCEL-1: 404 unknown, else 204 whether it was canceled now, was terminal, or lost a race."""
    ctx = context_of(request)
    outcome = await ctx.call(ctx.store.cancel, task_id_of(request))
    if outcome == "not_found":
        raise HttpError(404, NOT_FOUND)
    return Response(status_code=204)
