"""Server-sent events for ``GET /api/v1/mesh/{id}/events`` (GW-SSE-1 .. GW-SSE-11): wire format and the stream loop.

Wire format (GW-SSE-2): optional ``retry:``, optional ``id: <seq>``, ``event: <name>``, one ``data: <single-line
JSON>``, blank line; ``:keepalive`` comments. The JSON escapes U+0085, U+2028 and U+2029 too: SSE does not end a line
there, but ``str.splitlines`` and the clients built on it (httpx ``iter_lines``) do. The loop reads the task's event
log through a :class:`StreamSource`:

1. catch-up ``status`` frame (``retry: 1000``, no id) built by the caller from a consistent read; ``L`` = the record's
   last event id, ``P`` = the client's position (GW-SSE-4);
2. the log after ``P``: ``status`` events up to ``L`` are skipped (the catch-up reflects them), ``fly`` events are
   replayed, everything after ``L`` is streamed, in sequence order, each with its id (GW-SSE-5, GW-SSE-6);
3. the stream ends after a terminal ``status`` event, after the replay when the catch-up is terminal, after
   ``max_seconds`` (GW-SSE-9) or when the client goes away (Starlette cancels the generator).

A missing sequence number with a later one present is waited for up to ``gap_wait`` seconds, then skipped
(GW-DATA-3). Polling runs every ``poll_fast`` s while an event arrived in the last ``fast_window`` s, else every
``poll_slow`` s; ``:keepalive`` is written after ``keepalive`` s without output. Before each poll of a ``pending`` or
``running`` task the source applies the read-path backstop (GW-BACK-3).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio

from asya.envelope import dumps
from asya_gateway.errors import HttpError
from asya_gateway.validation import parse_non_negative_int

__all__ = [
    "KEEPALIVE",
    "SSE_HEADERS",
    "TERMINAL_STATUSES",
    "LogEvent",
    "SseSettings",
    "StreamSource",
    "format_event",
    "parse_last_event_id",
    "stream_events",
]

KEEPALIVE: Final = ":keepalive\n\n"
RETRY_MS: Final = 1000
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
ACTIVE_STATUSES: Final = frozenset({"pending", "running"})
SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
#: Line breaks for ``str.splitlines`` that JSON leaves raw inside strings (the rest are control characters it escapes).
_SPLITLINES_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def format_event(name: str, data: Any, *, event_id: int | None = None, retry: int | None = None) -> str:
    """One SSE event; ``data`` is encoded as compact single-line JSON (JSON escapes CR and LF in strings; the
    ``splitlines`` breaks it leaves raw are escaped here, which encodes the same value)."""
    lines = []
    if retry is not None:
        lines.append(f"retry: {retry}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {name}")
    lines.append(f"data: {dumps(data).translate(_SPLITLINES_BREAKS)}")
    return "\n".join(lines) + "\n\n"


def parse_last_event_id(header: str | None, query: str | None) -> int:
    """The client's position ``P``: the ``Last-Event-ID`` header wins over ``?last_event_id=``; absent means 0.
    Anything but a non-negative integer answers 400 (GW-SSE-1)."""
    if header is not None:
        raw, source = header, "Last-Event-ID"
    elif query is not None:
        raw, source = query, "last_event_id"
    else:
        return 0
    position = parse_non_negative_int(raw)
    if position is None:
        raise HttpError(400, f"{source} must be a non-negative integer, got {raw[:40]!r}")
    return position


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One event of the task's log as the stream writes it: ``name`` is ``status`` or ``fly``."""

    seq: int
    name: str
    data: Mapping[str, Any]

    @property
    def status(self) -> str | None:
        value = self.data.get("status") if self.name == "status" else None
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class SseSettings:
    poll_fast: float = 0.25
    poll_slow: float = 1.0
    fast_window: float = 5.0
    keepalive: float = 15.0
    max_seconds: float = 840.0
    gap_wait: float = 2.0


class StreamSource(Protocol):
    async def events_after(self, seq: int) -> list[LogEvent]:
        """Events with a sequence number above ``seq``, ordered by sequence (a consistent read)."""
        ...

    async def enforce_deadline(self) -> None:
        """Apply the read-path backstop (GW-BACK-3) when the task is past its deadline; its event shows up in the
        log."""
        ...


async def stream_events(
    source: StreamSource,
    *,
    catchup: Mapping[str, Any],
    last_seq: int,
    position: int,
    settings: SseSettings,
    monotonic: Callable[[], float] = time.monotonic,
) -> AsyncIterator[str]:
    """The body of one SSE response (after the 404/204 checks, which the route makes before starting it)."""
    started = monotonic()
    last_output = started
    last_event_at = started
    yield format_event("status", catchup, retry=RETRY_MS)
    status = catchup.get("status")
    replay_only = status in TERMINAL_STATUSES
    # a position past the log (a stale or forged Last-Event-ID) must not hide the events still to come (GW-SSE-6)
    cursor = min(position, last_seq)
    gap_seen_at: float | None = None
    while True:
        if status in ACTIVE_STATUSES and not replay_only:
            await source.enforce_deadline()
        events = await source.events_after(cursor)
        now = monotonic()
        for event in events:
            if event.seq <= cursor:
                continue
            if replay_only and event.seq > last_seq:
                break
            if event.seq > cursor + 1:
                if gap_seen_at is None:
                    gap_seen_at = now
                if now - gap_seen_at < settings.gap_wait:
                    break
            gap_seen_at = None
            cursor = event.seq
            if event.name == "status":
                status = event.status or status
                if event.seq <= last_seq:
                    continue
            yield format_event(event.name, event.data, event_id=event.seq)
            last_output = last_event_at = now
            if event.name == "status" and status in TERMINAL_STATUSES:
                return
        if replay_only and gap_seen_at is None:
            return
        now = monotonic()
        if now - started >= settings.max_seconds:
            return
        if now - last_output >= settings.keepalive:
            yield KEEPALIVE
            last_output = now
        fast = now - last_event_at < settings.fast_window or gap_seen_at is not None
        await anyio.sleep(settings.poll_fast if fast else settings.poll_slow)
