"""``POST /api/v1/mesh/{id}/resume``: resume a paused task with a client's input (GW-RESUME-1..4,
P-RESUME-1, GW-BACK-1, GW-BACK-5).

Body ``{"input": object, "timeout"?: integer}`` (``timeout`` as GW-CREATE-6; other members answer 400 naming them).
Answers:

- 404 ``{"error": "not found"}`` for an unknown id;
- 409 ``{"error": "task is not paused (status: <s>)"}`` for a task that is not paused, and for a lost race with
  another resume or a cancel (the status found); ``{"error": "the pause timed out at <ts>: task is not paused
  (status: <s>)"}`` when the task's last pause expired before this resume (P-WAIT-2); 409 ``{"error": "task has no
  stored envelope to resume"}`` while x-pause has not stored ``paused/{id}.json`` yet (the client retries);
- 400 ``{"error": "input: must not be or hold a storage reference: ..."}`` for an input that is a reference or has a
  ``__ref__`` member, which the merge would put at the root of the paused payload (GW-REF-2);
- 400 ``{"error": "missing required field '<name>'"}`` / ``{"error": "field '<name>' must be <type>"}`` against
  ``pause_metadata.fields`` (GW-RESUME-1, ``asya.pausing.input_problem``);
- 202 ``{"id", "status": "running", "deadline_at"}`` after: ONE conditional write ``paused -> running`` (message
  ``Resumed``, the fence raised to ``(h_pause, maximum)`` so a redelivered x-pause is a duplicate, the deadline now +
  ``timeout`` else + ``remaining_seconds``, none when both are null), the deadline timer armed (GW-BACK-1), and the
  resume envelope sent to ``asya-{ns}-x-resume`` (P-RESUME-1);
- 500 ``{"error": "failed to dispatch resume"}`` when the timer or the send fails: the task is set back to
  ``paused`` with its frozen ``remaining_seconds`` (GW-RESUME-4), so the client can resume again.

Write units: 1 (the task item, under 1 KB), plus the ``long_deadlines`` index entry for a deadline over 900 s away.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import naming, pausing
from asya.exceptions import SerializationError
from asya.store import Outcome, StatusUpdate
from asya.transport import TransportError
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import ResumeRequest, parse_body
from asya_gateway.routes.tasks import NOT_FOUND, load_view, task_id_of
from asya_gateway.timers import TimerError
from asya_gateway.tracing import caller_traces, trace_headers
from asya_gateway.validation import refuse_reference

__all__ = ["NO_ENVELOPE", "dispatch_resume", "resume_paused", "resume_task"]

_log = logging.getLogger("asya_gateway.resume")

NO_ENVELOPE: Final = "task has no stored envelope to resume"
_DISPATCH_FAILED: Final = "failed to dispatch resume"


async def resume_task(request: Request) -> Response:
    ctx = context_of(request)
    task_id = task_id_of(request)
    body = parse_body(ResumeRequest, await read_json_object(request, limit=CREATE_BODY_LIMIT))
    answer = await resume_paused(
        ctx,
        task_id,
        body.input,
        timeout=body.timeout,
        **caller_traces(request.headers),
    )
    return JSONResponse(answer, status_code=202)


async def resume_paused(
    ctx: GatewayContext,
    task_id: str,
    given: object,
    *,
    timeout: int | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> dict[str, Any]:
    """P-RESUME-1 for any front end (REST, A2A ``message/send`` with a ``taskId``): ``{"id", "status": "running",
    "deadline_at"}``; raises :class:`HttpError` with the REST answer's status and message (404, 409, 400, 500)."""
    if not isinstance(given, dict):
        raise HttpError(400, "input must be an object")
    refuse_reference(given, "input", merged=True)
    view = await load_view(ctx, task_id)
    if view["status"] != "paused":
        raise HttpError(409, _not_paused(view))
    metadata = view.get("pause_metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("event"), str):
        raise HttpError(
            409,
            f"task waits for event '{metadata['event']}': send it with POST /api/v1/mesh/{task_id}/signal",
        )
    problem = pausing.input_problem(metadata if isinstance(metadata, dict) else None, given)
    if problem is not None:
        raise HttpError(400, problem)
    return await dispatch_resume(
        ctx, task_id, view, given, timeout=timeout, traceparent=traceparent, tracestate=tracestate
    )


async def dispatch_resume(
    ctx: GatewayContext,
    task_id: str,
    view: dict[str, Any],
    given: object,
    *,
    timeout: int | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """P-RESUME-1's write and send for a paused task whose ``view`` was read and checked: a resume's input or a
    signal's data (P-WAIT-5) to x-resume."""
    metadata = view.get("pause_metadata")
    if not await ctx.call(ctx.store.has_paused_envelope, task_id):
        raise HttpError(409, NO_ENVELOPE)
    remaining = view.get("remaining_seconds")
    seconds = timeout if timeout is not None else remaining
    now = ctx.clock()
    update, deadline_at = pausing.resume_write(task_id, seconds=seconds, now=now, message=message)
    result = await ctx.call(ctx.store.apply, task_id, update)
    if result.outcome is Outcome.NOT_FOUND:
        raise HttpError(404, NOT_FOUND)
    if not result.accepted:
        raise HttpError(409, _not_paused(await load_view(ctx, task_id)))
    envelope = pausing.resume_envelope(
        task_id,
        given,
        seconds=seconds,
        deadline_at=deadline_at,
        now=now,
        trace=trace_headers(traceparent, tracestate, {}),
    )
    try:
        if deadline_at is not None:
            await ctx.call(ctx.timers.arm, task_id, deadline_at)
        await ctx.call(ctx.transport.send, naming.RESUME, envelope)
    except (TimerError, TransportError, SerializationError) as exc:
        _log.error("resume of task %s not dispatched: %s", task_id, exc)
        await _back_to_paused(ctx, task_id, metadata, remaining)
        raise HttpError(500, _DISPATCH_FAILED) from None
    return {"id": task_id, "status": "running", "deadline_at": deadline_at}


def _not_paused(view: dict[str, Any]) -> str:
    """The 409 message for a task found not paused; it names an expired pause (P-WAIT-2)."""
    found = f"task is not paused (status: {view['status']})"
    timed_out = view.get("pause_timed_out_at")
    return f"the pause timed out at {timed_out}: {found}" if isinstance(timed_out, str) else found


async def _back_to_paused(ctx: GatewayContext, task_id: str, metadata: object, remaining: object) -> None:
    """GW-RESUME-4: the task is paused again with its frozen budget; its raised fence stays (x-pause is done)."""
    update = StatusUpdate(
        status="paused",
        pause_metadata=metadata if isinstance(metadata, dict) else dict(pausing.DEFAULT_METADATA),
        remaining_seconds=remaining if isinstance(remaining, int) else None,
        message="Resume not dispatched",
        envelope_id=task_id,
    )
    await ctx.call(ctx.store.apply, task_id, update)
