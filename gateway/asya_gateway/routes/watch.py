"""``GET /api/v1/mesh/events?ids=a,b,...``: one SSE stream, many tasks (GW-SSE-20..27; docs/http.md GW-SSE-20..27).

- ``ids``: 1 to 100 comma-separated task ids, each non-empty, storable and named once; anything else answers 400
  naming the bad value. Without ``ids`` the path is the task ``events`` (GW-GEN-7: any string is an id).
- The cursor map, in ``Last-Event-ID`` (or ``?last_event_id=``): ``id:seq`` pairs joined by ``,``, split at each
  pair's last ``:`` (ids cannot hold ``,``, the separator of ``ids``), ``seq`` a non-negative integer, each id one of
  ``ids`` and named once; the empty string is the empty map. A malformed map answers 400. Every event with a number
  carries ``id: <map>``, the map of the last numbered event sent per task after this one (tasks at 0 left out), so a
  browser's ``EventSource`` resumes every task where it was.
- Every event's data carries ``task_id``. A task at or past its terminal event is not sent again; unknown ids get one
  ``gone`` event, and so does a task whose record disappears (GW-SSE-9). 404 when no id names a task, 204 when every
  task is terminal and the map is at or past each terminal event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from asya.store.records import is_storable_id
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.errors import HttpError
from asya_gateway.follow import FollowEvent
from asya_gateway.multifollow import GONE, MAX_IDS, Watched, catch_up, follow_many
from asya_gateway.routes.tasks import NOT_FOUND, task_item
from asya_gateway.sse import KEEPALIVE, RETRY_MS, SSE_HEADERS, format_event
from asya_gateway.validation import parse_non_negative_int

__all__ = ["encode_cursor_map", "parse_cursor_map", "parse_ids", "watch_events"]

_SHOWN: Final = 40


def parse_ids(raw: str) -> list[str]:
    """The ``ids`` parameter: 1..100 distinct storable ids, comma-separated; 400 otherwise."""
    ids = raw.split(",")
    if len(ids) > MAX_IDS:
        raise HttpError(400, f"ids names {len(ids)} tasks; at most {MAX_IDS} per stream")
    seen: set[str] = set()
    for task_id in ids:
        if not task_id:
            raise HttpError(400, f"ids has an empty id: {raw[:_SHOWN]!r}")
        if not is_storable_id(task_id):
            raise HttpError(400, f"ids has an id too long to name a task: {task_id[:_SHOWN]!r}...")
        if task_id in seen:
            raise HttpError(400, f"ids names {task_id[:_SHOWN]!r} twice")
        seen.add(task_id)
    return ids


def parse_cursor_map(raw: str, ids: Sequence[str], *, source: str) -> dict[str, int]:
    """A cursor map ``id:seq,id:seq`` (module docstring); 400 naming the bad pair."""
    positions: dict[str, int] = {}
    if not raw:
        return positions
    known = set(ids)
    for pair in raw.split(","):
        task_id, colon, number = pair.rpartition(":")
        seq = parse_non_negative_int(number) if colon else None
        if not task_id or seq is None:
            raise HttpError(400, f"{source} must be 'id:seq' pairs joined by ',', got {pair[:_SHOWN]!r}")
        if task_id not in known:
            raise HttpError(400, f"{source} names {task_id[:_SHOWN]!r}, which is not in ids")
        if task_id in positions:
            raise HttpError(400, f"{source} names {task_id[:_SHOWN]!r} twice")
        positions[task_id] = seq
    return positions


def encode_cursor_map(watched: Sequence[Watched], done: Mapping[str, int]) -> str:
    """The stream's cursor map: every task's last numbered event, those at 0 left out."""
    pairs = {**done, **{w.task_id: w.sent for w in watched}}
    return ",".join(f"{task_id}:{seq}" for task_id, seq in pairs.items() if seq > 0)


async def watch_events(request: Request) -> Response:
    """``/api/v1/mesh/events``: with ``ids`` the multiplexed stream; without, the task whose id is ``events``."""
    if "ids" not in request.query_params:
        request.scope.setdefault("path_params", {})["task_id"] = "events"
        return await task_item(request)
    ctx = context_of(request)
    ids = parse_ids(request.query_params["ids"])
    header = request.headers.get("last-event-id")
    query = request.query_params.get("last_event_id")
    raw, source = (header, "Last-Event-ID") if header is not None else (query or "", "last_event_id")
    positions = parse_cursor_map(raw, ids, source=source)
    watched, missing, catchups = await catch_up(ctx, ids, positions)
    if not watched and len(missing) == len(ids):
        raise HttpError(404, NOT_FOUND)
    if not watched and not missing:
        return Response(status_code=204)
    # tasks already at their end keep their entry of the map, so a later resume does not replay them
    done = {task_id: seq for task_id, seq in positions.items() if task_id not in {w.task_id for w in watched}}
    return StreamingResponse(_body(ctx, watched, missing, catchups, done), headers=SSE_HEADERS)


async def _body(
    ctx: GatewayContext,
    watched: list[Watched],
    missing: list[str],
    catchups: list[FollowEvent],
    done: dict[str, int],
) -> AsyncIterator[str]:
    retry: int | None = RETRY_MS
    for task_id in missing:
        yield format_event(GONE, {"task_id": task_id}, retry=retry)
        retry = None
    for first, event in zip(watched, catchups, strict=True):
        yield format_event(event.name, {**event.data, "task_id": first.task_id}, retry=retry)
        retry = None
    events = follow_many(ctx, watched, settings=ctx.sse_settings, stopping=ctx.draining.is_set)
    async for task, event in events:
        if task is None:
            yield KEEPALIVE
        elif event.seq is None:
            yield format_event(event.name, {**event.data, "task_id": task.task_id})
        else:
            task.sent = event.seq
            yield format_event(
                event.name, {**event.data, "task_id": task.task_id}, event_id=encode_cursor_map(watched, done)
            )
