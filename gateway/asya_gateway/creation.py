"""Starting a task (GW-CREATE-7), shared by ``POST /api/v1/mesh/``, MCP ``tools/call`` and A2A ``message/send``.

:func:`start_task` takes a validated target and body: it makes a UUID4, builds the envelope headers (client headers,
trace context, ``x-asya-flow`` and ``x-asya-progress`` for a flow, ``x-asya-gateway-url`` when a callback URL is
configured, plus the caller's ``extra_headers`` such as A2A's ids), computes ``deadline_at``, writes the record, arms
the deadline timer (GW-BACK-1, ``asya_gateway.timers``), then sends the envelope to the first actor.

The timer is armed before the envelope is sent, not after (GW-CREATE-7 lists it last): a failed timer send then
fails a task that nothing has started, in the same way as a failed envelope send (``failed`` with ``dispatch failed:
<AWS error code>``, 500), so a client is never answered 201 for a task whose deadline nothing would enforce. A timer
armed for a task whose first send then fails finds the task failed (or deleted) and drops itself.

For a compiled flow (``flows.<name>.source``) the flow's first instructions run before the record is written,
under the create's conditional put (P-FLOW-5): the envelope's route is the one they choose, and an expression error
is answered 400. Any construct may come first (P-FLOW-30): the create then sends a fan-out's slices (children first,
the task's own slice 0 to the flow's aggregator last), the envelope to x-pause, or the finished task to x-sink.
They run in a worker thread, bounded like any continuation (P-FLOW-21: value sizes, and a time budget of
``asya.flows.interp.TIME_BUDGET_SECONDS``), so an expensive start never holds the event loop. The program is kept by
its digest in the bucket first (P-FLOWV-3, ``asya.programstore``): a put that fails answers 503 with
``Retry-After`` and creates nothing, so no task starts on a program that is not kept.

A missing queue deletes the record again (:class:`DispatchError` 404, GW-CREATE-8); any other send failure marks
the task ``failed`` with ``dispatch failed: <AWS error code>`` and raises :class:`DispatchError` 500 ``failed to
dispatch message`` (an :class:`HttpError` whose ``reason`` MCP and A2A report).

A timer or send refused by AWS throttling or unavailability (GW-OVL-4) is not a failed task: nothing has started,
so the record is deleted again and the request answered 429/503 with ``Retry-After`` (:class:`OverloadError`), and a
retry creates the task afresh. When the delete fails too, the task stays ``pending`` (``OverloadError.kept``): a
retry with the same ``Idempotency-Key`` resumes it (sends what is missing), and its deadline timer, when it was
armed, ends it otherwise. A resumed creation (``resume=True``) never deletes: the task is the first request's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
from asya.envelope import Envelope, Route, Status
from asya.exceptions import SerializationError
from asya.flows import STATE_HEADER, FlowError, FlowState, Program, start
from asya.programstore import ProgramStoreError
from asya.routing import Outgoing
from asya.store import StatusUpdate
from asya.timeutil import format_ts
from asya.transport import TransportError, UnknownActorError
from asya_gateway.context import GatewayContext
from asya_gateway.errors import HttpError, OverloadError, overload_error
from asya_gateway.principal import owner_of_new_task, require_flow_scopes
from asya_gateway.timers import TimerError
from asya_gateway.tracing import trace_headers
from asya_gateway.validation import CreateBody, CreateTarget

__all__ = ["DispatchError", "aws_error_code", "created_answer", "deadline_of", "start_task"]

_log = logging.getLogger("asya_gateway.tasks")


class DispatchError(HttpError):
    """The envelope could not be sent: ``reason`` is the AWS error code (or ``actor not found: <name>``), the HTTP
    answer is the REST route's (GW-CREATE-7, GW-CREATE-8)."""

    def __init__(self, status: int, message: str, *, reason: str, task_id: str) -> None:
        super().__init__(status, message)
        self.reason = reason
        self.task_id = task_id


async def start_task(
    ctx: GatewayContext,
    target: CreateTarget,
    create: CreateBody,
    *,
    traceparent: str | None = None,
    tracestate: str | None = None,
    extra_headers: Mapping[str, str] | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
    now: datetime | None = None,
    resume_deadline: str | None = None,
    resume: bool = False,
    start_at: Route | None = None,
    start_headers: Mapping[str, Any] | None = None,
    fan_out: Callable[[Envelope], list[Outgoing]] | None = None,
) -> dict[str, Any]:
    """Create and dispatch one task (``task_id``: the id the caller chose, e.g. an MCP handshake-era call's id
    derived from its session and request id, ``asya_gateway.mcp.cancel``; else a fresh UUID4); answers ``{"id",
    "status": "pending", "deadline_at"?}``.

    ``resume``: the record ``task_id`` exists already (a replayed ``Idempotency-Key`` whose first creation may have
    stopped before its send, GW-CREATE-R3-7): arm the timer for ``resume_deadline`` and send the envelope again.
    ``start_at``/``start_headers``: a retry from a recorded step (P-HIST-6) starts on that step's route with its
    headers (a compiled flow's state among them), not at the flow's start. ``fan_out``: a retry from a fan-out slice
    (P-HIST-9) sends what it returns for the task's envelope (the slices, the task's own last) instead."""
    auth = ctx.manifest.gateway.auth
    require_flow_scopes(auth, target.flow)
    task_id = task_id or str(uuid.uuid4())
    now = now or ctx.clock()
    deadline_at = resume_deadline if resume else deadline_of(target, create, now)
    headers = _envelope_headers(ctx, target, create, traceparent=traceparent, tracestate=tracestate)
    headers.update(start_headers or {})
    headers.update(extra_headers or {})
    if start_at is not None and STATE_HEADER in headers:
        headers[STATE_HEADER] = _replayed_state(headers[STATE_HEADER], task_id, deadline_at)
    entry = target.route[0] if target.route else ""  # a compiled flow may start with a test (P-FLOW-5)
    route = Route(prev=[], curr=entry, next=list(target.route[1:]))
    if start_at is not None:
        entry, route = start_at.curr, Route(list(start_at.prev), start_at.curr, list(start_at.next))
    envelope = Envelope(
        id=task_id,
        route=route,
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
    sends = fan_out(envelope) if fan_out is not None else [Outgoing(actor=entry, envelope=envelope)]
    program = _program(ctx, target) if start_at is None else None
    if program is not None:  # a compiled flow's first instructions run here, before the create (P-FLOW-5)
        await _keep_program(ctx, program)
        # in a worker thread under the continuation's time budget: never on the event loop (P-FLOW-21)
        sends = await ctx.call(_start_flow, program, envelope, format_ts(now))
        entry = sends[-1].envelope.route.curr or sends[-1].actor
    destination = sends[-1].actor  # the queue the task's own envelope waits in: admission reads its depth
    if not resume:
        if ctx.admission is not None and destination:
            timeout = create.timeout if create.timeout is not None else target.default_timeout
            await ctx.call(ctx.admission.check, destination, timeout)
        await ctx.call(
            ctx.store.create_task,
            task_id=task_id,
            actor=entry,
            flow=target.flow,
            payload=create.payload,
            deadline_at=deadline_at,
            context_id=context_id,
            owner=owner_of_new_task(auth),
        )
    try:
        if deadline_at is not None:
            await _arm_deadline(ctx, task_id, deadline_at)
        for outgoing in sends:  # a fan-out's slices first, the task's own envelope (slice 0) last (P-FLOW-30)
            await _dispatch(ctx, task_id, outgoing.actor, outgoing.envelope)
    except OverloadError as exc:
        if not resume:
            exc.kept = not await _undo_create(ctx, task_id)
        raise
    return created_answer(task_id, deadline_at)


def _replayed_state(raw: object, task_id: str, deadline_at: str | None) -> dict[str, Any]:
    """P-HIST-8: the recorded flow state rebound to the new task; one that does not parse creates no task (a task
    started on it could only fail later, under an id that is not its own)."""
    try:
        return FlowState.from_header(raw).replayed(task_id, deadline_at).to_header()
    except FlowError as exc:
        raise HttpError(409, f"the step's flow state cannot be replayed: {exc}") from None


def deadline_of(target: CreateTarget, create: CreateBody, now: datetime) -> str | None:
    """The task's ``deadline_at`` (GW-CREATE-7 step 3), ``None`` without a timeout."""
    timeout = create.timeout if create.timeout is not None else target.default_timeout
    return None if timeout is None else format_ts(now + timedelta(seconds=timeout))


def created_answer(task_id: str, deadline_at: str | None) -> dict[str, Any]:
    """The 201 body of a create (GW-CREATE-9)."""
    answer: dict[str, Any] = {"id": task_id, "status": "pending"}
    if deadline_at is not None:
        answer["deadline_at"] = deadline_at
    return answer


def _program(ctx: GatewayContext, target: CreateTarget) -> Program | None:
    spec = ctx.manifest.flows.get(target.flow) if target.flow is not None else None
    return spec.program if spec is not None else None


async def _keep_program(ctx: GatewayContext, program: Program) -> None:
    """P-FLOWV-3: the program is in the store before any task of it exists; a failed put creates nothing."""
    if ctx.programs is None:
        return
    try:
        await ctx.call(ctx.programs.publish, program)
    except ProgramStoreError as exc:
        _log.error("flow program not kept: %s", exc)
        message = f"flow '{program.flow}' is not available: {exc.code}"
        raise HttpError(503, message, headers={"Retry-After": "1"}) from None


def _start_flow(program: Program, envelope: Envelope, now: str) -> list[Outgoing]:
    """P-FLOW-5: the envelopes the compiled flow starts with, the task's own last: one to the first actor, x-pause
    or x-sink, or a fan-out's slices with slice 0 to the aggregator (P-FLOW-30). A flow error is the client's 400
    (the payload does not fit the flow)."""
    outs = start(program, envelope, now=now)
    first = outs[-1]
    status = first.envelope.status
    if status is not None and status.phase == "failed":
        message = (status.error or {}).get("message", "flow error")
        raise HttpError(400, f"flow '{program.flow}' cannot start: {message}")
    return outs


def _envelope_headers(
    ctx: GatewayContext,
    target: CreateTarget,
    create: CreateBody,
    *,
    traceparent: str | None,
    tracestate: str | None,
) -> dict[str, Any]:
    headers = dict(create.headers)
    headers.pop(hdr.TRACESTATE, None)
    headers.update(trace_headers(traceparent, tracestate, create.headers))
    if target.flow is not None:
        headers[hdr.FLOW] = target.flow
        spec = ctx.manifest.flows.get(target.flow)
        if spec is not None and spec.history == "steps":  # the run history is on (P-HIST-1)
            headers[hdr.HISTORY] = str(spec.history_body_bytes)
        if target.progress is not None:
            headers[hdr.PROGRESS] = target.progress
    if hdr.HISTORY not in headers and ctx.config.history_all_tasks is not None:
        headers[hdr.HISTORY] = str(ctx.config.history_all_tasks)  # every task is recorded (P-HIST-10, asya dev)
    callback_url = ctx.manifest.gateway.callback_url
    if callback_url:
        headers[hdr.GATEWAY_URL] = callback_url
    return headers


async def _undo_create(ctx: GatewayContext, task_id: str) -> bool:
    """Delete a task that an overload kept from starting (GW-OVL-4); False when the delete failed too."""
    try:
        await ctx.call(ctx.store.delete_task, task_id)
    except (ClientError, BotoCoreError) as exc:
        _log.warning("task %s kept pending: its undo after an overload failed: %s", task_id, exc)
        return False
    return True


async def _arm_deadline(ctx: GatewayContext, task_id: str, deadline_at: str) -> None:
    try:
        await ctx.call(ctx.timers.arm, task_id, deadline_at)
    except TimerError as exc:
        overload = overload_error(exc, ctx.config.retry_after_seconds)
        if overload is not None:
            _log.warning("deadline timer of task %s not armed (overload): %s", task_id, exc)
            raise overload from exc
        _log.error("deadline timer of task %s not armed: %s", task_id, exc)
        update = StatusUpdate(status="failed", error=f"dispatch failed: {exc.code}", envelope_id=task_id)
        await ctx.call(ctx.store.apply_status, task_id, update)
        raise DispatchError(500, "failed to dispatch message", reason=exc.code, task_id=task_id) from None


async def _dispatch(ctx: GatewayContext, task_id: str, actor: str, envelope: Envelope) -> None:
    try:
        await ctx.call(ctx.transport.send, actor, envelope)
    except UnknownActorError:
        await ctx.call(ctx.store.delete_task, task_id)
        message = f"actor not found: {actor}"
        raise DispatchError(404, message, reason=message, task_id=task_id) from None
    except (TransportError, SerializationError) as exc:
        overload = overload_error(exc, ctx.config.retry_after_seconds)
        if overload is not None:
            _log.warning("dispatch of task %s to %s refused (overload): %s", task_id, actor, exc)
            raise overload from exc
        code = aws_error_code(exc)
        _log.error("dispatch of task %s to %s failed: %s", task_id, actor, exc)
        update = StatusUpdate(status="failed", error=f"dispatch failed: {code}", envelope_id=task_id)
        await ctx.call(ctx.store.apply_status, task_id, update)
        raise DispatchError(500, "failed to dispatch message", reason=code, task_id=task_id) from None


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
