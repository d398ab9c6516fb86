"""Server-sent events for ``GET /api/v1/mesh/{id}/events`` (GW-SSE-1 .. GW-SSE-11): the wire format.

Wire format (GW-SSE-2): optional ``retry:``, optional ``id: <seq>``, ``event: <name>``, one ``data: <single-line
JSON>``, blank line; ``:keepalive`` comments. The JSON escapes U+0085, U+2028 and U+2029 too: SSE does not end a line
there, but ``str.splitlines`` and the clients built on it (httpx ``iter_lines``) do. What is sent, and when, is
``asya_gateway.follow``: :func:`sse_body` writes its events in this format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from asya.envelope import dumps
from asya_gateway.errors import HttpError
from asya_gateway.validation import parse_non_negative_int

__all__ = [
    "KEEPALIVE",
    "SSE_HEADERS",
    "TERMINAL_STATUSES",
    "SseSettings",
    "format_event",
    "parse_last_event_id",
    "sse_body",
]

KEEPALIVE: Final = ":keepalive\n\n"
RETRY_MS: Final = 1000
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
#: Line breaks for ``str.splitlines`` that JSON leaves raw inside strings (the rest are control characters it escapes).
_SPLITLINES_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def format_event(name: str, data: Any, *, event_id: int | str | None = None, retry: int | None = None) -> str:
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
class SseSettings:
    """Poll cadence and limits of a follower (GW-SSE-9); ``gap_wait`` is the hold-back of a number without a fly
    item (GW-SSE-6: 1 s)."""

    poll_fast: float = 0.25
    poll_slow: float = 1.0
    fast_window: float = 5.0
    keepalive: float = 15.0
    max_seconds: float = 840.0
    gap_wait: float = 1.0
    #: a multiplexed stream's idle polls back off from ``poll_slow`` up to this, twice it (GW-SSE-20..27)
    poll_max: float = 2.0


async def sse_body(events: AsyncIterator[Any]) -> AsyncIterator[str]:
    """The SSE text of a follower's events (``asya_gateway.follow.FollowEvent``): the catch-up carries ``retry``."""
    async for event in events:
        if event.name == "keepalive":
            yield KEEPALIVE
        elif event.seq is None:
            yield format_event(event.name, event.data, retry=RETRY_MS)
        else:
            yield format_event(event.name, event.data, event_id=event.seq)
