"""SSE wire format, ``Last-Event-ID`` parsing and the stream loop of the gateway (GW-SSE-2 .. GW-SSE-9, GW-DATA-3).

The loop runs against an in-memory event log implementing the ``StreamSource`` protocol and a tick clock (each
reading advances one second), so sequence-gap waits and the duration limit are exercised without real time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from asya_gateway.errors import HttpError
from asya_gateway.sse import KEEPALIVE, LogEvent, SseSettings, format_event, parse_last_event_id, stream_events

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"


def test_format_event_gw_sse_2() -> None:
    assert format_event("status", {"status": "running"}, retry=1000) == (
        'retry: 1000\nevent: status\ndata: {"status":"running"}\n\n'
    )
    assert format_event("fly", {"payload": "a\nb"}, event_id=10) == 'id: 10\nevent: fly\ndata: {"payload":"a\\nb"}\n\n'
    assert format_event("fly", {"payload": "é"}, event_id=1).endswith('data: {"payload":"é"}\n\n')
    assert KEEPALIVE == ":keepalive\n\n"


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [(None, None, 0), ("13", None, 13), (None, "4", 4), ("2", "9", 2), (" 7 ", None, 7), ("0", None, 0)],
)
def test_last_event_id_header_wins_gw_sse_1(header: str | None, query: str | None, expected: int) -> None:
    assert parse_last_event_id(header, query) == expected


@pytest.mark.parametrize(
    ("header", "query", "message"),
    [
        ("-1", None, "Last-Event-ID must be a non-negative integer, got '-1'"),
        ("abc", "3", "Last-Event-ID must be a non-negative integer, got 'abc'"),
        (None, "1.5", "last_event_id must be a non-negative integer, got '1.5'"),
        ("", None, "Last-Event-ID must be a non-negative integer, got ''"),
    ],
)
def test_bad_last_event_id_is_400_gw_sse_1(header: str | None, query: str | None, message: str) -> None:
    with pytest.raises(HttpError) as info:
        parse_last_event_id(header, query)
    assert (info.value.status, info.value.message) == (400, message)


def status(seq: int, value: str) -> LogEvent:
    return LogEvent(seq=seq, name="status", data={"id": TASK, "status": value})


def fly(seq: int, payload: Any) -> LogEvent:
    return LogEvent(seq=seq, name="fly", data={"payload": payload, "actor": "a", "envelope_id": TASK})


class MemoryLog:
    """An event log whose content can change between polls (``on_poll`` runs before each read)."""

    def __init__(self, events: list[LogEvent], on_poll: Callable[[int, list[LogEvent]], None] | None = None) -> None:
        self.events = events
        self.polls = 0
        self.deadline_checks = 0
        self.on_poll = on_poll

    async def events_after(self, seq: int) -> list[LogEvent]:
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self.polls, self.events)
        return sorted((e for e in self.events if e.seq > seq), key=lambda e: e.seq)

    async def enforce_deadline(self) -> None:
        self.deadline_checks += 1


class TickClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


SETTINGS = SseSettings(poll_fast=0, poll_slow=0, fast_window=5, keepalive=1000, max_seconds=1000, gap_wait=3)


def run(
    log: MemoryLog, *, catchup_status: str, last_seq: int, position: int = 0, settings: SseSettings = SETTINGS
) -> list[str]:
    async def collect() -> list[str]:
        chunks = []
        async for chunk in stream_events(
            log,
            catchup={"id": TASK, "status": catchup_status},
            last_seq=last_seq,
            position=position,
            settings=settings,
            monotonic=TickClock(),
        ):
            chunks.append(chunk)
        return chunks

    return anyio.run(collect)


def ids_and_names(chunks: list[str]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for chunk in chunks:
        if chunk == KEEPALIVE:
            out.append((None, "keepalive"))
            continue
        fields = dict(line.split(": ", 1) for line in chunk.strip().split("\n"))
        out.append((fields.get("id"), fields["event"]))
    return out


def test_replay_skips_logged_status_and_streams_live_until_terminal_gw_sse_5_7() -> None:
    def grow(poll: int, events: list[LogEvent]) -> None:
        if poll == 2:
            events.extend([fly(4, "late"), status(5, "succeeded"), fly(6, "after end")])

    log = MemoryLog([status(1, "pending"), status(2, "running"), fly(3, "early")], grow)
    chunks = run(log, catchup_status="running", last_seq=3)
    assert chunks[0].startswith("retry: 1000\nevent: status\n")
    assert ids_and_names(chunks) == [(None, "status"), ("3", "fly"), ("4", "fly"), ("5", "status")]
    assert log.deadline_checks >= 2


def test_a_position_past_the_log_still_streams_every_later_event_gw_sse_6() -> None:
    """A Last-Event-ID ahead of the log (L = 2, P = 1000) replays nothing, then streams every event with seq > L."""

    def grow(poll: int, events: list[LogEvent]) -> None:
        if poll == 2:
            events.extend([fly(3, "late"), status(4, "succeeded")])

    log = MemoryLog([status(1, "pending"), status(2, "running")], grow)
    chunks = run(log, catchup_status="running", last_seq=2, position=1000)
    assert ids_and_names(chunks) == [(None, "status"), ("3", "fly"), ("4", "status")]


def test_position_skips_replayed_values_gw_sse_5() -> None:
    log = MemoryLog([status(1, "pending"), fly(2, "a"), fly(3, "b"), status(4, "canceled")])
    assert ids_and_names(run(log, catchup_status="canceled", last_seq=4, position=2)) == [
        (None, "status"),
        ("3", "fly"),
    ]


def test_terminal_catchup_replays_only_up_to_l_and_checks_no_deadline_gw_sse_6() -> None:
    log = MemoryLog([status(1, "pending"), fly(2, "x"), status(3, "succeeded"), fly(4, "late")])
    assert ids_and_names(run(log, catchup_status="succeeded", last_seq=3)) == [(None, "status"), ("2", "fly")]
    assert log.deadline_checks == 0


def test_missing_sequence_is_awaited_then_filled_gw_data_3() -> None:
    def fill(poll: int, events: list[LogEvent]) -> None:
        if poll == 2:
            events.append(fly(2, "slow writer"))

    log = MemoryLog([status(1, "pending"), fly(3, "b"), status(4, "succeeded")], fill)
    assert ids_and_names(run(log, catchup_status="pending", last_seq=1)) == [
        (None, "status"),
        ("2", "fly"),
        ("3", "fly"),
        ("4", "status"),
    ]


def test_missing_sequence_is_skipped_after_the_wait_gw_data_3() -> None:
    log = MemoryLog([status(1, "pending"), fly(3, "b"), status(4, "failed")])
    chunks = run(log, catchup_status="pending", last_seq=1)
    assert ids_and_names(chunks) == [(None, "status"), ("3", "fly"), ("4", "status")]
    assert log.polls >= 2  # it waited at least one poll before skipping


def test_keepalive_and_duration_limit_gw_sse_9() -> None:
    settings = SseSettings(poll_fast=0, poll_slow=0, fast_window=0, keepalive=2, max_seconds=10, gap_wait=3)
    log = MemoryLog([status(1, "pending")])
    names = [name for _, name in ids_and_names(run(log, catchup_status="pending", last_seq=1, settings=settings))]
    assert names[0] == "status"
    assert set(names[1:]) == {"keepalive"}
    assert len(names) > 2


def test_paused_is_not_terminal_gw_sse_7() -> None:
    def resume(poll: int, events: list[LogEvent]) -> None:
        if poll == 2:
            events.extend([status(3, "running"), status(4, "succeeded")])

    log = MemoryLog([status(1, "pending"), status(2, "paused")], resume)
    assert ids_and_names(run(log, catchup_status="paused", last_seq=2)) == [
        (None, "status"),
        ("3", "status"),
        ("4", "status"),
    ]
