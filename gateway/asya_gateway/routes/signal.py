"""``POST /api/v1/mesh/{id}/signal``: deliver a named event to a task (GW-SIGNAL-1..4, P-WAIT-4, P-WAIT-5).

Body ``{"event": "<name>", "data"?: <any JSON, default null>}`` (other members answer 400 naming them). The owner
check is the task routes' (GW-EDGE-8: another subject's task answers 404). Answers:

- 400 for an event that is not a name (1 to 64 letters, digits, ``.``, ``_``, ``-``), for data that is or holds a
  storage reference (GW-REF-2: the mesh alone writes them), and for data over 64 KiB as JSON;
- 202 ``{"id", "event", "delivered": true, "status": "running", "deadline_at"}`` when the task is paused in a
  ``wait_for`` of that event: the resume's write and send (P-RESUME-1), the data as the input x-resume sets at the
  wait's path;
- 202 ``{"id", "event", "delivered": false, "status": <s>}`` when the task does not wait for it yet (pending,
  running, or paused for something else): the signal is buffered on the task item (``asya.store.signals``) until a
  ``wait_for`` of the event takes it;
- 409 ``{"error": "a signal of event '<e>' is already buffered for the task"}`` for a second signal of an event
  still buffered (the first one stays); 409 ``{"error": "task has ended (status: <s>)"}``; 409 while x-pause has not
  stored its file yet (the client retries, as for a resume).

Write units: 1 (the buffering, or the resume's write).
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.naming import is_event_name
from asya.store.signals import MAX_SIGNAL_BYTES, buffer_signal
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import SignalRequest, parse_body
from asya_gateway.routes.resume import NO_ENVELOPE, dispatch_resume
from asya_gateway.routes.tasks import NOT_FOUND, load_view, task_id_of
from asya_gateway.tracing import caller_traces
from asya_gateway.validation import refuse_reference

__all__ = ["deliver_signal", "signal_task"]

_TERMINAL: Final = frozenset({"succeeded", "failed", "canceled"})


async def signal_task(request: Request) -> Response:
    ctx = context_of(request)
    task_id = task_id_of(request)
    body = parse_body(SignalRequest, await read_json_object(request, limit=CREATE_BODY_LIMIT))
    answer = await deliver_signal(
        ctx,
        task_id,
        body.event,
        body.data,
        **caller_traces(request.headers),
    )
    return JSONResponse(answer, status_code=202)


async def deliver_signal(
    ctx: GatewayContext,
    task_id: str,
    event: object,
    data: Any,
    *,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> dict[str, Any]:
    """GW-SIGNAL-1..4 for any front end (REST, the CLI, MCP's ``signal`` tool, A2A's ``tasks/signal``); raises
    :class:`HttpError` with the REST answer's status and message."""
    if not isinstance(event, str) or not is_event_name(event):
        raise HttpError(400, f"event: must be 1 to 64 letters, digits, '.', '_' or '-', got {event!r}")
    refuse_reference(data, "data", merged=True)
    size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_SIGNAL_BYTES:
        raise HttpError(400, f"data: {size} bytes as JSON, over the limit of {MAX_SIGNAL_BYTES}")
    view = await load_view(ctx, task_id)  # the owner check (GW-EDGE-8)
    for _ in range(2):
        if _waits_for(view, event):
            answer = await dispatch_resume(
                ctx,
                task_id,
                view,
                data,
                traceparent=traceparent,
                tracestate=tracestate,
                message=f"Signal '{event}' delivered",
            )
            return {**answer, "event": event, "delivered": True}
        if view["status"] in _TERMINAL:
            raise HttpError(409, f"task has ended (status: {view['status']})")
        outcome = await ctx.call(buffer_signal, ctx.store.dynamodb, ctx.store.table, task_id, event, data)
        if outcome == "buffered":
            return {"id": task_id, "event": event, "delivered": False, "status": view["status"]}
        if outcome == "duplicate":
            raise HttpError(409, f"a signal of event '{event}' is already buffered for the task")
        if outcome == "not_found":
            raise HttpError(404, NOT_FOUND)
        view = await load_view(ctx, task_id)  # ended or now waiting for the event: read what it is now
    raise HttpError(409, NO_ENVELOPE)


def _waits_for(view: dict[str, Any], event: str) -> bool:
    metadata = view.get("pause_metadata")
    return view["status"] == "paused" and isinstance(metadata, dict) and metadata.get("event") == event
