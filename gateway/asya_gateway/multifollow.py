"""Following many tasks in one stream (GW-SSE-20..27: ``GET /api/v1/mesh/events?ids=...``).

Each task has its own :class:`asya_gateway.follow.TaskFollower`, with the single-task stream's rules; one loop steps
them all from batched reads, so a poll of ``n`` unfinished tasks costs one ``BatchGetItem`` of their task items
(``TaskStore.peek``), not ``n`` queries:

1. the catch-up is one strongly consistent ``BatchGetItem`` (it answers 404/204 and fixes each task's ``L``); a task
   whose status is terminal or paused is read again by its own strongly consistent query, for its result, error
   details or pause metadata, which live in items written after the task item (GW-DATA-2); under ``owner_only``
   another subject's task counts as unknown (GW-EDGE-7, the owner is on the task item the read returns);
2. a poll reads the task items of the unfinished tasks EVENTUALLY consistently: an older replica's item has a lower
   ``last_seq`` and the follower skips it (numbers never go backwards), so a stale read delays an event and never
   reorders one;
3. the numbers above a task's cursor that may be FLY values are read by key in the same poll, with one STRONGLY
   consistent ``BatchGetItem``: a flush's chunk is the item ``EV#{its last number}``, so the newest flush (``fly_from``
   .. ``fly_to`` on the task item) is read at ``fly_to`` (then below the chunk found, if the flush had several), and
   any other unexplained number ``n`` (not ``status_seq``) at ``EV#n``. A number whose read found no item counts as a
   status change, so this read must see every item written: hence strong;
4. a task item that shows a new terminal or paused status is read again with the task's strongly consistent query
   (as 1), since its values live in other items; a task that finished drops out of the polls;
5. a task whose item is gone (no strong read finds it, GW-SSE-9) gets a ``gone`` event and drops out;
6. polls run every ``2 x poll_fast`` s (0.5 s) while some task changed in the last ``fast_window`` s or holds a
   number back, then every ``poll_slow`` s, doubling while nothing changes up to ``poll_max`` s: a poll reads every
   unfinished task's item (half a read unit each), so a stream of many tasks polls at half the pace of a single
   task's stream, whose query reads one; keepalives, ``max_seconds`` and the
   drain are as for one task. The read-path backstop (GW-BACK-3) applies per task before a poll.

:func:`follow_many` yields ``(task_id, event)`` pairs; ``asya_gateway.multisse`` writes them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio

from asya.store import Snapshot
from asya_gateway.context import GatewayContext
from asya_gateway.follow import KEEPALIVE, FollowEvent, TaskFollower
from asya_gateway.principal import is_visible
from asya_gateway.sse import SseSettings

__all__ = ["GONE", "MAX_IDS", "Watched", "catch_up", "follow_many"]

#: At most this many ids per stream (GW-SSE-20..27); a ``BatchGetItem`` reads 100 keys.
MAX_IDS: Final = 100
#: The event of a task whose record is gone (GW-SSE-9); it drops out of the stream.
GONE: Final = "gone"
#: Statuses whose event carries values stored outside the task item (result, error details, pause metadata).
_WITH_VALUES: Final = frozenset({"succeeded", "failed", "paused"})


@dataclass(slots=True)
class Watched:
    """One task of a multiplexed stream: its follower, its FLY values read but not yet sent, and the id of the last
    event sent for it (its entry of the stream's cursor map)."""

    task_id: str
    follower: TaskFollower
    sent: int = 0
    fly: dict[int, dict[str, Any]] = field(default_factory=dict)
    stepped_seq: int = -1

    def wanted(self, snap: Snapshot) -> list[int]:
        """The keys (``EV#n``) worth reading for what ``snap`` shows above the cursor (module docstring, rule 3)."""
        cursor = self.follower.cursor
        open_numbers = [n for n in range(cursor + 1, snap.last_seq + 1) if n != snap.status_seq and n not in self.fly]
        low, high = snap.fly_range
        newest = [n for n in open_numbers if low <= n <= high]
        older = [n for n in open_numbers if not low <= n <= high]
        return older + newest[-1:]


async def catch_up(
    ctx: GatewayContext, task_ids: Sequence[str], positions: Mapping[str, int]
) -> tuple[list[Watched], list[str], list[FollowEvent]]:
    """The catch-up (rule 1): the tasks to follow, the unknown ids, and for each followed task its catch-up event in
    ``task_ids`` order (``Watched`` and events align). A task at or past its terminal event is left out."""
    now = time.monotonic()
    found = await ctx.call(ctx.store.peek, task_ids, consistent=True)
    watched: list[Watched] = []
    missing: list[str] = []
    events: list[FollowEvent] = []
    auth = ctx.manifest.gateway.auth
    for task_id in task_ids:
        snap = found.get(task_id)
        if snap is not None and not is_visible(auth, {"owner": snap.owner}):
            snap = None  # another's task is an unknown id (GW-EDGE-7)
        if snap is not None and snap.status in _WITH_VALUES:
            snap = await ctx.call(ctx.store.snapshot, task_id, snap.last_seq)
        if snap is None:
            missing.append(task_id)
            continue
        position = positions.get(task_id, 0)
        if snap.terminal and position >= snap.last_seq:
            continue
        follower = TaskFollower(
            catchup=snap.data, last_seq=snap.last_seq, position=position, gap_wait=ctx.sse_settings.gap_wait, now=now
        )
        follower.deadline_at = snap.deadline_at
        watched.append(Watched(task_id, follower, sent=position))
        events.append(follower.catchup)
    return watched, missing, events


async def follow_many(
    ctx: GatewayContext,
    watched: Sequence[Watched],
    *,
    settings: SseSettings,
    monotonic: Callable[[], float] = time.monotonic,
    stopping: Callable[[], bool] | None = None,
) -> AsyncIterator[tuple[Watched | None, FollowEvent]]:
    """The events of the followed tasks after their catch-up (module docstring, rules 2-6); a keepalive is paired
    with ``None``."""
    started = last_output = monotonic()
    idle_sleep = settings.poll_slow
    while True:
        active = [w for w in watched if not w.follower.done]
        if not active:
            return
        for w in active:
            overdue = w.follower.overdue(ctx.clock)
            if overdue is not None:
                await ctx.call(ctx.store.time_out_overdue, w.task_id, overdue)
        ids = [w.task_id for w in active]
        peeked = await ctx.call(ctx.store.peek, ids)
        snaps: dict[str, Snapshot | None] = {}
        wanted: dict[str, list[int]] = {}
        for w in active:
            snap = peeked.get(w.task_id)
            fresh = snap is not None and (snap.last_seq > w.stepped_seq or snap.terminal or w.follower.held is not None)
            if snap is None or (snap.status in _WITH_VALUES and fresh):
                # a miss may be a replica behind the task's creation; a terminal or paused status needs its values,
                # and a terminal task is read so until its last FLY value and terminal event are sent
                snap = await ctx.call(ctx.store.snapshot, w.task_id, w.follower.cursor)
                snaps[w.task_id] = snap
                continue
            if snap.status in _WITH_VALUES:
                continue  # nothing new since the values were read; an eventually consistent copy would lack them
            snaps[w.task_id] = snap
            numbers = w.wanted(snap)
            if numbers:
                wanted[w.task_id] = numbers
        if wanted:
            read = await ctx.call(ctx.store.fly_by_numbers, wanted)
            for task_id, events in read.items():
                target = next(w for w in active if w.task_id == task_id)
                target.fly.update({int(event["seq"]): event for event in events})
        now = monotonic()
        changed = False
        for w in active:
            if w.task_id not in snaps:
                continue
            snap = snaps[w.task_id]
            if snap is None:
                w.follower.done = True
                yield w, FollowEvent(GONE, None, {})
                last_output = now
                continue
            if not snap.fly and w.fly:
                snap = dataclasses.replace(snap, fly=[e for n, e in sorted(w.fly.items()) if n > w.follower.cursor])
            w.stepped_seq = max(w.stepped_seq, snap.last_seq)
            for event in w.follower.step(snap, now):
                yield w, event
                last_output = now
                changed = True
            w.fly = {n: e for n, e in w.fly.items() if n > w.follower.cursor}
        if now - started >= settings.max_seconds or (stopping is not None and stopping()):
            return
        if now - last_output >= settings.keepalive:
            yield None, KEEPALIVE
            last_output = now
        fast = changed or any(
            now - w.follower.last_change < settings.fast_window or w.follower.held is not None
            for w in active
            if not w.follower.done
        )
        if fast:
            idle_sleep = settings.poll_slow
            await _pause(2 * settings.poll_fast, stopping, settings.poll_fast)
        else:
            await _pause(idle_sleep, stopping, settings.poll_fast)
            idle_sleep = min(idle_sleep * 2, settings.poll_max)


async def _pause(seconds: float, stopping: Callable[[], bool] | None, step: float) -> None:
    """Sleep ``seconds``, waking every ``step`` to see whether the server drains: a backed-off stream must still end
    within the drain's grace period, as a single task's stream does."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0 or (stopping is not None and stopping()):
            return
        await anyio.sleep(min(left, step) if step > 0 else left)
