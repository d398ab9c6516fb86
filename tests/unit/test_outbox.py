"""The batch outbox (``asya.outbox``): one buffer for the frames of every record of a batch, frame 0 last, FLY
windows, failures kept with their record (P-ROUTE-8, P-ROUTE-9, P-ROUTE-10, P-RES-10, P-STAT-16), on an injected
monotonic clock. The real ``Transport`` encodes and sends; an in-memory SQS client answers it."""

from __future__ import annotations

import contextvars
import gc
import json
import threading
import time
import weakref
from typing import Any, cast

import pytest

from asya.envelope import Envelope, Route, Status
from asya.exceptions import SerializationError
from asya.outbox import FLY_INTERVAL, FRAME_MAX_WAIT, Outbox, Ticker, Ticket
from asya.reporting import HopRef, ProgressMode
from asya.routing import Outgoing, Trace
from asya.transport import MAX_MESSAGE_BYTES, Transport, TransportError, UnknownActorError

pytestmark = pytest.mark.unit

TRACE = Trace.for_hop({}, enabled=False)
_RECORD: contextvars.ContextVar[str] = contextvars.ContextVar("test_outbox_record", default="none")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Sqs:
    """An SQS client answering ``SendMessageBatch`` in memory; entries whose envelope id is in ``failing`` fail."""

    class meta:
        endpoint_url = "https://sqs.test"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.failing: set[str] = set()
        self.sent = threading.Event()

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [json.loads(e["MessageBody"])["id"] for e in Entries]
        self.calls.append((QueueUrl.rsplit("-", 1)[-1], ids))
        self.sent.set()
        ok = [e for e, i in zip(Entries, ids, strict=True) if i not in self.failing]
        bad = [e for e, i in zip(Entries, ids, strict=True) if i in self.failing]
        return {
            "Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}"} for e in ok],
            "Failed": [{"Id": e["Id"], "Code": "InternalError", "Message": "no"} for e in bad],
        }

    def ids(self) -> list[list[str]]:
        return [ids for _, ids in self.calls]


class Reporter:
    """Records the FLY flushes and ``completed`` events the outbox writes."""

    def __init__(self) -> None:
        self.flushes: list[list[Any]] = []
        self.events: list[tuple[str, int]] = []

    def fly(self, task_id: str, envelope_id: str, values: list[Any]) -> None:
        self.flushes.append(list(values))

    def completed(self, hop: HopRef, mode: ProgressMode, duration_ms: int, frames: int) -> None:
        self.events.append((hop.task_id, frames))


class Errors:
    """Records the lost frames the outbox hands over, with the record context they were handled in."""

    def __init__(self) -> None:
        self.lost: list[tuple[list[str], str, str]] = []

    def unknown_destinations(
        self, unknown: list[tuple[Any, UnknownActorError]], *, entry: Envelope, report: Any, now: str, trace: Trace
    ) -> None:
        self.lost.append(([frame.envelope.id for frame, _ in unknown], entry.id, _RECORD.get()))


class Harness:
    def __init__(self, *, ticker: Ticker | None = None, clock: Clock | None = None) -> None:
        self.sqs = Sqs()
        self.clock = clock or Clock()
        self.reporter = Reporter()
        self.errors = Errors()
        transport = Transport(
            namespace="demo", sqs=cast(Any, self.sqs), account_id="123456789012", sleep=lambda _: None
        )
        self.outbox = Outbox(
            transport=transport,
            errors=cast(Any, self.errors),
            reporter=cast(Any, self.reporter),
            ticker=ticker,
            now=lambda: "2026-01-01T00:00:00Z",
            monotonic=self.clock,
        )

    def ticket(self, task_id: str = "t", *, fly: bool = False, tracked: bool = False) -> Ticket:
        entry = _env(task_id, "b")
        report = HopRef(task_id=task_id, route=entry.route, envelope_id=task_id) if tracked else None
        return self.outbox.ticket(
            f"m-{task_id}", entry=entry, report=report, trace=TRACE, fly_id=task_id if fly else None
        )

    def stage(self, ticket: Ticket, *ids: str, actor: str = "next", payload: Any = 0) -> None:
        frames = [Outgoing(actor=actor, envelope=_env(i, actor, payload)) for i in ids]
        self.outbox.stage(ticket, frames, frames=len(frames))


def _env(env_id: str, curr: str, payload: Any = 0) -> Envelope:
    return Envelope(id=env_id, route=Route(["a"], curr, []), payload=payload, status=Status())


def test_p_route_9_ten_frames_waiting_for_one_queue_leave_at_once_in_yield_order() -> None:
    h = Harness()
    ticket = h.ticket()
    for i in range(12):  # one at a time, as a generator yields them
        h.stage(ticket, f"c{i}")
    assert h.sqs.ids() == [[f"c{i}" for i in range(10)]]
    assert h.outbox.close(ticket) == 12
    h.outbox.release_first(ticket)
    assert h.sqs.ids()[1:] == [["c10", "c11"]], "the release sends the ticket's other frames"


def test_p_route_9_a_waiting_frame_leaves_one_second_after_it_was_staged() -> None:
    h = Harness()
    ticket = h.ticket()
    h.stage(ticket, "c0")
    h.clock.now += FRAME_MAX_WAIT / 2
    h.stage(ticket, "c1")
    h.outbox.flush_due()
    assert h.sqs.calls == [], "not due yet"
    h.clock.now += FRAME_MAX_WAIT / 2
    h.outbox.flush_due()
    assert h.sqs.ids() == [["c0", "c1"]], "due 1 s after the oldest waiting frame"


def test_p_route_9_frame_0_leaves_after_every_other_frame_of_its_hop() -> None:
    h = Harness()
    ticket = h.ticket("t")
    h.stage(ticket, "t", "c1", "c2")  # frame 0 keeps the input id
    assert h.outbox.close(ticket) == 3
    h.outbox.flush_due()
    h.clock.now += 5 * FRAME_MAX_WAIT
    h.outbox.flush_due()
    assert h.sqs.ids() == [["c1", "c2"]], "frame 0 is held until the release"
    h.outbox.release_first(ticket)
    assert h.outbox.finish() == []
    assert h.sqs.ids() == [["c1", "c2"], ["t"]]


def test_p_route_9_one_frame_records_to_one_actor_leave_in_one_send_in_batch_order() -> None:
    h = Harness()
    for i in range(10):
        ticket = h.ticket(f"t{i}")
        h.stage(ticket, f"t{i}")
        h.outbox.close(ticket)
        h.outbox.release_first(ticket)
    assert h.sqs.ids() == [[f"t{i}" for i in range(10)]]


def test_p_stat_16_fly_values_flush_at_most_every_100_ms_and_on_close() -> None:
    h = Harness()
    ticket = h.ticket(fly=True)
    h.outbox.fly(ticket, "a")  # the first value opens a 100 ms window
    h.outbox.fly(ticket, "b")
    h.clock.now += FLY_INTERVAL / 2
    h.outbox.fly(ticket, "c")
    h.outbox.flush_due()
    assert h.reporter.flushes == []
    h.clock.now += FLY_INTERVAL / 2
    h.outbox.flush_due()
    assert h.reporter.flushes == [["a", "b", "c"]]
    h.outbox.fly(ticket, "d")
    h.clock.now += FLY_INTERVAL / 2
    h.outbox.flush_due()
    assert h.reporter.flushes == [["a", "b", "c"]]
    h.outbox.fly(ticket, "e")
    h.clock.now += FLY_INTERVAL / 2
    h.outbox.fly(ticket, "f")  # 100 ms after the last flush: leaves at once with what waits
    assert h.reporter.flushes == [["a", "b", "c"], ["d", "e", "f"]]
    h.outbox.fly(ticket, "g")
    h.outbox.close(ticket)
    assert h.reporter.flushes == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


def test_p_stat_16_first_fly_value_of_a_short_call_leaves_with_close() -> None:
    """A generator that yields one FLY value and ends within 100 ms costs one flush, not one at once plus one."""
    h = Harness()
    ticket = h.ticket(fly=True)
    h.outbox.fly(ticket, "only")
    assert h.reporter.flushes == []
    h.clock.now += FLY_INTERVAL / 5
    h.stage(ticket, "t")
    assert h.outbox.close(ticket) == 1
    assert h.reporter.flushes == [["only"]]


def test_p_stat_16_first_fly_value_waits_at_most_100_ms() -> None:
    """Live output: the first value leaves on the ticker 100 ms after it was emitted while the handler still runs."""
    h = Harness()
    ticket = h.ticket(fly=True)
    h.outbox.fly(ticket, "first")
    h.clock.now += FLY_INTERVAL * 0.99
    h.outbox.flush_due()
    assert h.reporter.flushes == []
    h.clock.now += FLY_INTERVAL * 0.01
    h.outbox.flush_due()
    assert h.reporter.flushes == [["first"]]


def test_fly_is_dropped_without_a_task_to_report_to() -> None:
    h = Harness()
    ticket = h.ticket(fly=False)
    h.outbox.fly(ticket, "ignored")
    assert h.outbox.close(ticket) == 0
    assert h.reporter.flushes == []


def test_p_res_10_an_unencodable_group_before_any_frame_left_drops_the_hops_waiting_frames() -> None:
    """Nothing of the hop left: the frames waiting are dropped, so the hop fails as one without frames; the frames
    it produces later are dropped too."""
    h = Harness()
    ticket = h.ticket("t")
    h.stage(ticket, "t", "c1")
    h.stage(ticket, "c2", "huge", payload="x" * MAX_MESSAGE_BYTES)
    h.stage(ticket, "c3")
    with pytest.raises(SerializationError, match="over the SQS limit"):
        h.outbox.close(ticket)
    assert ticket.staged == 0
    assert h.outbox.finish() == []
    assert h.sqs.calls == [], "nothing of the hop was sent"


def test_p_res_10_an_unencodable_group_after_a_frame_left_keeps_what_was_staged() -> None:
    h = Harness()
    ticket = h.ticket("t")
    h.stage(ticket, "t", "c1")
    h.clock.now += FRAME_MAX_WAIT
    h.outbox.flush_due()
    assert h.sqs.ids() == [["c1"]]
    h.stage(ticket, "c2")
    h.stage(ticket, "huge", payload="x" * MAX_MESSAGE_BYTES)
    with pytest.raises(SerializationError):
        h.outbox.close(ticket)
    assert ticket.staged == 3, "a partial failure: frames_sent counts what leaves"
    h.outbox.release_first(ticket)
    h.outbox.finish()
    assert h.sqs.ids() == [["c1"], ["c2"], ["t"]], "frame 0 last"


def test_p_route_10_a_failing_entry_fails_its_ticket_alone_and_its_frame_0_never_leaves() -> None:
    h = Harness()
    bad, good = h.ticket("t-bad"), h.ticket("t-ok")
    h.sqs.failing.add("c-bad")
    h.stage(bad, "t-bad", "c-bad")
    h.stage(good, "t-ok")
    h.outbox.release_first(good)
    with pytest.raises(TransportError, match="still failing after 3 retries"):
        h.outbox.release_first(bad)
    h.stage(bad, "c-later")
    failed = h.outbox.finish()
    assert [record for record, _ in failed] == ["m-t-bad"]
    sent = [i for ids in h.sqs.ids() for i in ids]
    assert "t-ok" in sent and "t-bad" not in sent and "c-later" not in sent


def test_p_route_8_lost_frames_go_to_x_sump_in_their_records_context() -> None:
    """A frame with no queue is handed to x-sump (``InfraErrors.unknown_destinations``) with its hop's entry, in a
    copy of the record's context: the record's trace header and log keys, even after the record ended."""
    h = Harness()
    token = _RECORD.set("record-1")
    ticket = h.ticket("t")
    _RECORD.reset(token)
    h.stage(ticket, "t")
    h.stage(ticket, "c-lost", actor="Not A Name")
    h.outbox.release_first(ticket)
    assert h.errors.lost == [(["c-lost"], "t", "record-1")]
    h.outbox.finish()
    assert h.sqs.ids() == [["t"]]


def test_p_proc_2_completed_is_written_once_every_frame_left() -> None:
    h = Harness()
    ticket = h.ticket("t", tracked=True)
    h.stage(ticket, "t", "c1")
    h.outbox.release_first(ticket)
    h.outbox.complete(ticket, ProgressMode.DETAILED, 5, 2)
    assert h.reporter.events == [], "frame 0 still waits"
    h.outbox.finish()
    assert h.reporter.events == [("t", 2)]
    unreleased = h.ticket("t-none", tracked=True)
    h.outbox.complete(unreleased, ProgressMode.DETAILED, 5, 0)
    assert h.reporter.events == [("t", 2)], "a hop without frames writes no completed"


def test_ticker_sends_a_waiting_frame_while_the_handler_is_busy() -> None:
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    h = Harness(ticker=ticker, clock=clock)
    ticket = h.ticket("t")
    h.stage(ticket, "c0")
    clock.now += FRAME_MAX_WAIT  # the frame is now due; the ticker thread wakes within its wait timeout
    ticker.schedule(h.outbox, clock.now)  # nudge: a schedule at "now" wakes the thread at once
    assert h.sqs.sent.wait(timeout=10), "the ticker thread must send the frame before the hop ends"
    assert h.sqs.ids() == [["c0"]]


def test_a_one_frame_hop_does_not_wake_the_ticker_before_its_release() -> None:
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    h = Harness(ticker=ticker, clock=clock)
    ticket = h.ticket("t")
    h.stage(ticket, "t")
    assert h.outbox.close(ticket) == 1
    assert not _started(ticker), "frame 0 is held: nothing to wait for yet"
    h.outbox.release_first(ticket)
    assert _started(ticker)
    h.outbox.finish()


class Due:
    """A ticker target that records its calls."""

    def __init__(self, name: str, calls: list[str], done: threading.Event) -> None:
        self.name, self.calls, self.done = name, calls, done

    def flush_due(self) -> None:
        self.calls.append(self.name)
        if len(self.calls) == 2:
            self.done.set()


def test_ticker_serves_each_target_at_its_own_time() -> None:
    """Outboxes are scheduled side by side: neither drops the other."""
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    calls: list[str] = []
    done = threading.Event()
    first, second, cancelled = Due("first", calls, done), Due("second", calls, done), Due("cancelled", calls, done)
    ticker.schedule(cancelled, clock.now + 1.0)
    ticker.cancel(cancelled)
    clock.now += 5.0
    ticker.schedule(second, clock.now - 1.0)
    ticker.schedule(first, clock.now)
    assert done.wait(timeout=10)
    assert calls == ["second", "first"], "the earliest first, each once"


def _started(ticker: Ticker) -> bool:
    return ticker._thread is not None


class _Flushed:
    def __init__(self, done: threading.Event) -> None:
        self.done = done

    def flush_due(self) -> None:
        self.done.set()


def test_ticker_keeps_no_target_alive_once_served() -> None:
    """A served target (a finished batch's outbox holds every envelope of the batch) is released while the thread
    parks, so a warm Lambda does not carry the previous batch into the next one (`make bench`, peak memory)."""
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    done = threading.Event()
    target = _Flushed(done)
    alive = weakref.ref(target)
    ticker.schedule(target, clock.now)
    assert done.wait(timeout=10)
    del target
    until = time.monotonic() + 30  # a failure guard: the thread drops its reference right after flush_due returns
    while alive() is not None and time.monotonic() < until:
        gc.collect()
        time.sleep(0.01)
    assert alive() is None, "the parked ticker thread still references the target it served"
