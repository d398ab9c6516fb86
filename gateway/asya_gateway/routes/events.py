"""``GET /api/v1/mesh/{id}/events`` (SSE, GW-SSE-1..11) and ``POST /api/v1/mesh/{id}/events`` (GW-EVT-1..9).

The SSE route answers 400 for a bad ``Last-Event-ID``, 404 for an unknown id and 204 when the client's position is at or
past the terminal event (GW-SSE-8) before any stream starts; the stream itself is :func:`asya_gateway.follow.follow`
over the task store, written by :func:`asya_gateway.sse.sse_body`; it ends early when the app drains
(:func:`asya_gateway.app.drain`), and the client resumes with ``Last-Event-ID``. The read-path backstop (GW-BACK-3)
needs the task's deadline: it is taken from every poll's read of the task item, so polling costs one query.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from asya.store import FlyValue, Outcome
from asya_gateway.body import EVENTS_BODY_LIMIT, read_json_object
from asya_gateway.context import context_of
from asya_gateway.errors import HttpError
from asya_gateway.follow import StoreSource, follow
from asya_gateway.producer import parse_producer_event
from asya_gateway.routes.tasks import NOT_FOUND, load_view, task_id_of
from asya_gateway.sse import SSE_HEADERS, TERMINAL_STATUSES, parse_last_event_id, sse_body

__all__ = ["task_events"]


async def task_events(request: Request) -> Response:
    """``/api/v1/mesh/{id}/events``: GET streams (GW-SSE-1..11), POST takes a producer event (GW-EVT-1..9)."""
    if request.method == "POST":
        return await post_event(request)
    return await stream_task_events(request)


async def stream_task_events(request: Request) -> Response:
    ctx = context_of(request)
    task_id = task_id_of(request)
    position = parse_last_event_id(request.headers.get("last-event-id"), request.query_params.get("last_event_id"))
    view = await load_view(ctx, task_id)
    last_seq = int(view["last_event_id"])
    if view["status"] in TERMINAL_STATUSES and position >= last_seq:
        return Response(status_code=204)
    events = follow(
        StoreSource(ctx, task_id, created_at=view.get("created_at")),
        catchup=ctx.store.status_data(view),
        last_seq=last_seq,
        position=position,
        settings=ctx.sse_settings,
        deadline_at=view.get("deadline_at"),
        clock=ctx.clock,
        stopping=ctx.draining.is_set,
    )
    return StreamingResponse(sse_body(events), headers=SSE_HEADERS)


async def post_event(request: Request) -> Response:
    """GW-EVT-5: 204 accepted or stale (a hop whose fence moved on, GW-EVT-3), 404 unknown id, 400 malformed or a
    crew status; the caller holds a reporter credential (GW-EVT-1, ``asya_gateway.auth``)."""
    ctx = context_of(request)
    task_id = task_id_of(request)
    body = await read_json_object(request, limit=EVENTS_BODY_LIMIT)
    event = parse_producer_event(body, task_id)
    if isinstance(event, FlyValue):
        # a terminal task drops the value (P-STAT-15): stale, not unknown (GW-EVT-5)
        found = await ctx.call(ctx.store.append_fly, task_id, [event]) or bool(
            await ctx.call(ctx.store.statuses, [task_id])
        )
    else:  # never terminal: those statuses are the crew's (GW-EVT-3)
        result = await ctx.call(ctx.store.apply, task_id, event)
        found = result.outcome is not Outcome.NOT_FOUND
    if not found:
        raise HttpError(404, NOT_FOUND)
    return Response(status_code=204)
