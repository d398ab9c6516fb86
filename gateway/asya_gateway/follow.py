"""Following one task as a stream of events: what SSE, MCP and A2A waits consume (contracts: ``follow_task``).

``follow_task(ctx, task_id, after=0)`` yields :class:`FollowEvent` values in this order:

1. the catch-up ``status`` (``seq`` None): the status data (GW-TASK-2) of a strongly consistent read of the task;
2. the task's log after ``after``: ``fly`` events are replayed and then followed live, each with its ``seq``;
   ``status`` events up to the catch-up's ``last_event_id`` are skipped (the catch-up reflects them), later ones are
   yielded as they are read (GW-SSE-6);
3. the terminal ``status`` always last, after which the iterator ends. A task that is terminal at the catch-up
   yields the replay of its fly events and then its terminal status again, so a consumer that only looks at the last
   event always sees the outcome.

The iterator does not end on its own otherwise (a paused task waits for its resume): consumers stop when they have
what they need or when their own wait limit passes (GW-MCP-8, GW-A2A-8). Before each poll of a ``pending`` or
``running`` task past its deadline the read-path backstop (GW-BACK-3) fails it. Polling follows the gateway's SSE
cadence (:class:`asya_gateway.sse.SseSettings`); a missing sequence number is waited for ``gap_wait`` s, then skipped
(GW-DATA-3).

This version is a thin adapter over the current event log (``TaskStore.events_after``); revision 2 of the store
replaces its internals, not its signature. Raises :class:`TaskNotFoundError` when the task does not exist.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio

from asya.exceptions import AsyaError
from asya.timeutil import parse_ts
from asya_gateway.context import GatewayContext

__all__ = ["ACTIVE_STATUSES", "TERMINAL_STATUSES", "FollowEvent", "TaskNotFoundError", "follow_task"]

TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
ACTIVE_STATUSES: Final = frozenset({"pending", "running"})


class TaskNotFoundError(AsyaError, LookupError):
    """The followed task does not exist (or expired)."""


@dataclass(frozen=True, slots=True)
class FollowEvent:
    """One event of a followed task: ``status`` data is GW-TASK-2's object, ``fly`` data GW-SSE-11's."""

    name: Literal["status", "fly"]
    seq: int | None
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str | None:
        value = self.data.get("status") if self.name == "status" else None
        return value if isinstance(value, str) else None


async def follow_task(ctx: GatewayContext, task_id: str, *, after: int = 0) -> AsyncIterator[FollowEvent]:
    """The events of ``task_id`` after sequence ``after`` (see the module docstring)."""
    view = await ctx.call(ctx.store.get_task, task_id)
    if view is None:
        raise TaskNotFoundError(f"task not found: {task_id}")
    catchup = ctx.store.status_data(view)
    last_seq = int(view["last_event_id"])
    status = str(catchup.get("status"))
    deadline_at: str | None = view.get("deadline_at")
    created_at = view.get("created_at")
    yield FollowEvent("status", None, catchup)
    settings = ctx.sse_settings
    cursor = min(after, last_seq)
    replay_only = status in TERMINAL_STATUSES
    gap_seen_at: float | None = None
    last_event_at = time.monotonic()
    while True:
        if status in ACTIVE_STATUSES and not replay_only:
            deadline = parse_ts(deadline_at)
            if deadline is not None and deadline <= ctx.clock():
                await ctx.call(ctx.store.time_out_overdue, task_id, deadline_at or "", created_at=created_at)
        raw = await ctx.call(ctx.store.events_after, task_id, cursor)
        now = time.monotonic()
        for entry in raw:
            seq = int(entry["seq"])
            if seq <= cursor:
                continue
            if replay_only and seq > last_seq:
                break
            if seq > cursor + 1:
                gap_seen_at = now if gap_seen_at is None else gap_seen_at
                if now - gap_seen_at < settings.gap_wait:
                    break
            gap_seen_at = None
            cursor = seq
            name = str(entry["event"])
            data = entry["data"]
            if name == "fly":
                last_event_at = now
                yield FollowEvent("fly", seq, data)
                continue
            previous, status = status, str(data.get("status") or status)
            if previous == "paused" and status != "paused":
                # a resume renews the deadline: read it again before the backstop uses it
                fresh = await ctx.call(ctx.store.get_task, task_id, enforce_deadline=False)
                deadline_at = None if fresh is None else fresh.get("deadline_at")
            if seq <= last_seq:
                continue
            last_event_at = now
            yield FollowEvent("status", seq, data)
            if status in TERMINAL_STATUSES:
                return
        if replay_only and gap_seen_at is None:
            yield FollowEvent("status", last_seq, catchup)
            return
        fast = time.monotonic() - last_event_at < settings.fast_window or gap_seen_at is not None
        await anyio.sleep(settings.poll_fast if fast else settings.poll_slow)
