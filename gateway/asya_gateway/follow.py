"""Following a task: the events SSE, MCP and A2A waits emit, from reads of the task item (GW-SSE-3..10,
GW-MCP-8, GW-BACK-3; P-STAT-3, P-STAT-16).

Status changes are numbered on the task item (``last_seq``) but stored as no item, so a follower emits ``status``
events from what it reads on the task item, and ``fly`` events from the fly items (``TaskStore.snapshot``: one
strongly consistent query per poll). Rules:

1. the catch-up: the first event is always ``status`` with the status data of a consistent read, with no id
   (GW-SSE-4); ``L`` is that read's ``last_seq``, ``P`` the client's position, the cursor starts at ``min(P, L)``;
2. each poll sends, in number order, every fly event above the cursor; a number in ``(cursor, last_seq]`` without a
   fly item is held back until ``gap_wait`` seconds (1 s) after this follower first saw it (its fly item may still
   be written, P-STAT-16), then counts as a status change; no event passes a held-back number (GW-SSE-6). The task
   item names the numbers of its newest FLY flush (``fly_from``..``fly_to``) and of its latest status change
   (``status_seq``): only a number of that flush can still get its item, so only those are held back; any other
   number without an item is a status change at once (flushes of one envelope are sequential: its earlier flushes'
   items were written before the newest flush took its numbers). So a fast task's terminal status and the FLY
   values after a hop's claim arrive without the hold-back's second;
3. when the record's status data changed since the last status sent (status, step, current actor, progress, and
   also the rest, such as a retry's attempt; not the timestamp alone), one ``status`` event with the record's state
   and id = ``last_seq``, or one less than the lowest held-back number, whichever is lower (changes between two
   polls coalesce, so ids may skip, GW-SSE-3); ids never repeat (GW-SSE-28): the status event goes before the
   first fly event numbered after the record's latest status change (``status_seq``), with the id just below that
   fly event's, and a status event whose id would not be above the last id sent (or the client's position) waits
   for the held-back number;
4. a terminal record is sent last, once no number is held back: every fly event, then the terminal ``status`` with
   id = ``last_seq``, and the stream ends (GW-SSE-6, GW-SSE-7); a catch-up that is already terminal is followed by
   the replay and this same terminal event;
5. polls run every ``poll_fast`` s while something changed in the last ``fast_window`` s, else every ``poll_slow`` s; a
   ``keepalive`` event is yielded after ``keepalive`` s without output; the stream ends after ``max_seconds``, when the
   task is gone (GW-SSE-9), or after the poll during which ``stopping()`` became true (the server drains). Before a poll
   of a ``pending``/``running`` task past its deadline the follower applies the read-path backstop (GW-BACK-3).

:func:`follow` is the engine over any :class:`FollowSource`; :func:`follow_task` follows a task of the gateway's
store from a position, for waits that need no 404/204 answer first (MCP, A2A).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio

from asya.store import Snapshot
from asya.timeutil import Clock, parse_ts
from asya_gateway.context import GatewayContext
from asya_gateway.principal import is_visible
from asya_gateway.sse import SseSettings

__all__ = [
    "KEEPALIVE",
    "TERMINAL_STATUSES",
    "FollowEvent",
    "FollowSource",
    "StoreSource",
    "TaskFollower",
    "follow",
    "follow_task",
]

TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
_ACTIVE: Final = frozenset({"pending", "running"})


@dataclass(frozen=True, slots=True)
class FollowEvent:
    """One event of a followed task: ``name`` is ``status``, ``fly`` or ``keepalive``; ``seq`` is its id (``None``
    for the catch-up and keepalives)."""

    name: str
    seq: int | None
    data: Mapping[str, Any]

    @property
    def terminal(self) -> bool:
        return self.name == "status" and self.seq is not None and self.data.get("status") in TERMINAL_STATUSES


#: Yielded after ``keepalive`` seconds without output, so a transport can keep its connection alive.
KEEPALIVE: Final = FollowEvent("keepalive", None, {})


class FollowSource(Protocol):
    async def snapshot(self, after: int) -> Snapshot | None:
        """The task's state and its fly events above ``after`` (a consistent read); ``None`` once it is gone."""
        ...

    async def time_out(self, deadline_at: str) -> None:
        """The read-path backstop (GW-BACK-3) for a task past ``deadline_at``."""
        ...


class StoreSource:
    """A task of the gateway's store as a :class:`FollowSource`."""

    def __init__(self, ctx: GatewayContext, task_id: str, *, created_at: str | None = None) -> None:
        self._ctx = ctx
        self._task_id = task_id
        self._created_at = created_at

    async def snapshot(self, after: int) -> Snapshot | None:
        return await self._ctx.call(self._ctx.store.snapshot, self._task_id, after)

    async def time_out(self, deadline_at: str) -> None:
        ctx = self._ctx
        await ctx.call(ctx.store.time_out_overdue, self._task_id, deadline_at, created_at=self._created_at)


def _state(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a status event says, but its timestamp: a change of any of it is worth an event. GW-SSE-6 names status,
    step, current actor and progress; a second retry of the same actor changes only its ``attempt``, and a follower
    must see that too."""
    return {key: value for key, value in data.items() if key != "timestamp"}


class TaskFollower:
    """The rules of one follower (see the module docstring) as a state machine stepped by reads of its task: one loop
    drives it for one task (:func:`follow`), a batched loop for many (``asya_gateway.multifollow``). A read whose
    ``last_seq`` is below one already stepped is older (an eventually consistent read of another replica): it is
    skipped, since numbers never go backwards (GW-SSE-20..27)."""

    def __init__(
        self, *, catchup: Mapping[str, Any], last_seq: int, position: int, gap_wait: float, now: float
    ) -> None:
        self.catchup = FollowEvent("status", None, catchup)
        self.cursor = min(position, last_seq)
        self.status = catchup.get("status")
        self.deadline_at: str | None = None
        #: the newest flush named by the last read stepped, and its status change (what may still be fly)
        self.last_snapshot: Snapshot | None = None
        self.held: int | None = None
        self.done = False
        self.last_change = now
        self._gap_wait = gap_wait
        self._sent_state = _state(catchup)
        self._seen_seq = last_seq
        #: the highest id the client has: its position, then each event sent with an id (GW-SSE-28)
        self._last_id = self.cursor
        self._first_seen: dict[int, float] = {}

    def step(self, snap: Snapshot, now: float) -> list[FollowEvent]:
        """The events a read of the task gives (rules 2-4); sets ``done`` after the terminal event."""
        if snap.last_seq < self._seen_seq:
            return []
        self._seen_seq = snap.last_seq
        self.last_snapshot = snap
        self.status, self.deadline_at = snap.status, snap.deadline_at
        events: list[FollowEvent] = []
        cursor = self.cursor
        fly = {int(event["seq"]): event for event in snap.fly}
        for number in range(cursor + 1, snap.last_seq + 1):
            if number not in fly:  # every number's hold-back starts when this follower first sees it, not when reached
                self._first_seen.setdefault(number, now)
        held: int | None = None
        changed = not snap.terminal and _state(snap.data) != self._sent_state
        for number in range(cursor + 1, snap.last_seq + 1):
            event = fly.get(number)
            if event is not None:
                if changed and snap.status_seq < number and number - 1 > self._last_id:
                    # the status change came before this value: its event too, so that no later id repeats one
                    events.append(self._status(snap, number - 1, now))
                    changed = False
                events.append(FollowEvent("fly", number, event["data"]))
                cursor = self._last_id = number
                self.last_change = now
                continue
            if snap.may_be_fly(number) and now - self._first_seen[number] < self._gap_wait:
                held = number
                break
            cursor = number  # a number without an item, older than the hold-back: a status change
        self._first_seen = {n: t for n, t in self._first_seen.items() if n > cursor}
        self.held = held
        if held is None and snap.terminal:
            events.append(FollowEvent("status", snap.last_seq, snap.data))
            self.cursor = snap.last_seq
            self.done = True
            return events
        event_id = snap.last_seq if held is None else min(snap.last_seq, held - 1)
        if changed and event_id > self._last_id:
            events.append(self._status(snap, event_id, now))
            cursor = max(cursor, event_id)
        self.cursor = cursor
        return events

    def _status(self, snap: Snapshot, event_id: int, now: float) -> FollowEvent:
        self._sent_state = _state(snap.data)
        self._last_id = event_id
        self.last_change = now
        return FollowEvent("status", event_id, snap.data)

    def overdue(self, clock: Clock | None) -> str | None:
        """The deadline to apply the read-path backstop for (GW-BACK-3), when this task is active and past it."""
        if clock is None or self.status not in _ACTIVE or not isinstance(self.deadline_at, str):
            return None
        deadline = parse_ts(self.deadline_at)
        return self.deadline_at if deadline is not None and deadline <= clock() else None


async def follow(
    source: FollowSource,
    *,
    catchup: Mapping[str, Any],
    last_seq: int,
    position: int,
    settings: SseSettings,
    deadline_at: str | None = None,
    clock: Clock | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    stopping: Callable[[], bool] | None = None,
) -> AsyncIterator[FollowEvent]:
    """The events of one follower after the 404/204 checks (see the module docstring); ``catchup`` is the status data
    of the consistent read whose ``last_seq`` is ``last_seq``; ``deadline_at`` its deadline, for the read-path
    backstop when ``clock`` is given; ``stopping`` ends the stream early, at a point a resume loses nothing from."""
    started = last_output = monotonic()
    task = TaskFollower(catchup=catchup, last_seq=last_seq, position=position, gap_wait=settings.gap_wait, now=started)
    task.deadline_at = deadline_at
    yield task.catchup
    while True:
        overdue = task.overdue(clock)
        if overdue is not None:
            await source.time_out(overdue)
        snap = await source.snapshot(task.cursor)
        if snap is None:
            return
        now = monotonic()
        for event in task.step(snap, now):
            yield event
            last_output = now
        if task.done:
            return
        if now - started >= settings.max_seconds or (stopping is not None and stopping()):
            return
        if now - last_output >= settings.keepalive:
            yield KEEPALIVE
            last_output = now
        fast = now - task.last_change < settings.fast_window or task.held is not None
        await anyio.sleep(settings.poll_fast if fast else settings.poll_slow)


async def follow_task(
    ctx: GatewayContext, task_id: str, *, after: int = 0, settings: SseSettings | None = None
) -> AsyncIterator[FollowEvent]:
    """Follow a task of the store from position ``after``: nothing when the task does not exist."""
    view = await ctx.call(ctx.store.get_task, task_id)
    if view is None or not is_visible(ctx.manifest.gateway.auth, view):
        return
    source = StoreSource(ctx, task_id, created_at=view.get("created_at"))
    async for event in follow(
        source,
        catchup=ctx.store.status_data(view),
        last_seq=int(view["last_event_id"]),
        position=after,
        settings=settings or ctx.sse_settings,
        deadline_at=view.get("deadline_at"),
        clock=ctx.clock,
    ):
        yield event
