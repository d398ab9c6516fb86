"""Frame and FLY buffering of one handler call (P-ROUTE-9, P-STAT-16), on an injected monotonic clock."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any

import pytest

from asya.envelope import Envelope, Route
from asya.hop import HopOutput, Ticker
from asya.routing import Outgoing

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _out(i: int) -> Outgoing:
    return Outgoing(actor="b", envelope=Envelope(id=f"f{i}", route=Route(["a"], "b", []), payload=i))


class Sink:
    def __init__(self) -> None:
        self.frames: list[list[int]] = []
        self.fly: list[list[Any]] = []

    def send_frames(self, batch: list[Outgoing]) -> None:
        self.frames.append([o.envelope.payload for o in batch])

    def send_fly(self, values: list[Any]) -> None:
        self.fly.append(list(values))


def test_p_route_9_ten_waiting_frames_leave_at_once_in_yield_order() -> None:
    sink = Sink()
    hop = HopOutput(send_frames=sink.send_frames, send_fly=None, ticker=None, monotonic=Clock())
    for i in range(12):
        hop.add_frame(_out(i))
    assert sink.frames == [list(range(10))]
    assert hop.close() == 12
    assert sink.frames == [list(range(10)), [10, 11]]


def test_p_route_9_a_frame_leaves_one_second_after_it_was_yielded() -> None:
    sink, clock = Sink(), Clock()
    hop = HopOutput(send_frames=sink.send_frames, send_fly=None, ticker=None, monotonic=clock)
    hop.add_frame(_out(0))
    clock.now += 0.5
    hop.add_frame(_out(1))
    hop.flush_due()
    assert sink.frames == [], "not due yet"
    clock.now += 0.5
    hop.flush_due()
    assert sink.frames == [[0, 1]], "due 1 s after the oldest waiting frame"
    hop.add_frame(_out(2))
    assert hop.close() == 3
    assert sink.frames == [[0, 1], [2]]


def test_p_stat_16_fly_values_flush_at_most_every_100_ms_and_on_close() -> None:
    sink, clock = Sink(), Clock()
    hop = HopOutput(send_frames=sink.send_frames, send_fly=sink.send_fly, ticker=None, monotonic=clock)
    hop.add_fly("a")  # the first value opens a 100 ms window
    hop.add_fly("b")
    clock.now += 0.05
    hop.add_fly("c")
    hop.flush_due()
    assert sink.fly == []
    clock.now += 0.05
    hop.flush_due()
    assert sink.fly == [["a", "b", "c"]]
    hop.add_fly("d")
    clock.now += 0.05
    hop.flush_due()
    assert sink.fly == [["a", "b", "c"]]
    hop.add_fly("e")
    clock.now += 0.05
    hop.add_fly("f")  # 100 ms after the last flush: leaves at once with what waits
    assert sink.fly == [["a", "b", "c"], ["d", "e", "f"]]
    hop.add_fly("g")
    hop.close()
    assert sink.fly == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


def test_p_stat_16_first_fly_value_of_a_short_call_leaves_with_close() -> None:
    """A generator that yields one FLY value and ends within 100 ms costs one flush, not one at once plus one."""
    sink, clock = Sink(), Clock()
    hop = HopOutput(send_frames=sink.send_frames, send_fly=sink.send_fly, ticker=None, monotonic=clock)
    hop.add_fly("only")
    assert sink.fly == []
    clock.now += 0.02
    hop.add_frame(_out(0))
    assert hop.close() == 1
    assert sink.fly == [["only"]]
    assert sink.frames == [[0]]


def test_p_stat_16_first_fly_value_waits_at_most_100_ms() -> None:
    """Live output: the first value leaves on the ticker 100 ms after it was emitted while the handler still runs."""
    sink, clock = Sink(), Clock()
    hop = HopOutput(send_frames=sink.send_frames, send_fly=sink.send_fly, ticker=None, monotonic=clock)
    clock.now = 7.0
    hop.add_fly("first")
    clock.now += 0.099
    hop.flush_due()
    assert sink.fly == []
    clock.now += 0.001
    hop.flush_due()
    assert sink.fly == [["first"]]


def test_p_stat_16_fly_leaves_before_frames_on_close() -> None:
    order: list[str] = []
    hop = HopOutput(
        send_frames=lambda batch: order.append("frames"),
        send_fly=lambda values: order.append("fly"),
        ticker=None,
        monotonic=Clock(),
    )
    hop.add_fly("first")
    hop.add_frame(_out(0))
    hop.add_fly("second")
    hop.close()
    assert order == ["fly", "frames"]


def test_fly_is_dropped_without_a_sender() -> None:
    hop = HopOutput(send_frames=Sink().send_frames, send_fly=None, ticker=None, monotonic=Clock())
    hop.add_fly("ignored")
    assert hop.close() == 0


def test_p_route_10_a_send_error_is_raised_by_close_and_stops_later_frames() -> None:
    calls: list[list[Outgoing]] = []

    def failing(batch: list[Outgoing]) -> None:
        calls.append(batch)
        raise RuntimeError("SQS down")

    hop = HopOutput(send_frames=failing, send_fly=None, ticker=None, monotonic=Clock())
    for i in range(10):
        hop.add_frame(_out(i))
    hop.add_frame(_out(10))
    with pytest.raises(RuntimeError, match="SQS down"):
        hop.close()
    assert len(calls) == 1, "no send after the first failure"


def test_ticker_flushes_a_waiting_frame_while_the_handler_is_busy() -> None:
    sent = threading.Event()
    batches: list[list[Outgoing]] = []

    def send(batch: list[Outgoing]) -> None:
        batches.append(batch)
        sent.set()

    clock = Clock()
    ticker = Ticker(monotonic=clock)
    hop = HopOutput(send_frames=send, send_fly=None, ticker=ticker, monotonic=clock)
    hop.add_frame(_out(0))
    clock.now += 1.0  # the frame is now due; the ticker thread wakes within its wait timeout
    ticker.schedule(hop, clock.now)  # nudge: a schedule at "now" wakes the thread at once
    assert sent.wait(timeout=10), "the ticker thread must send the frame before close()"
    assert hop.close() == 1
    assert [[o.envelope.id for o in b] for b in batches] == [["f0"]]


def test_function_handlers_do_not_wake_the_ticker_for_their_single_frame() -> None:
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    hop = HopOutput(send_frames=Sink().send_frames, send_fly=None, ticker=ticker, schedule_first=False, monotonic=clock)
    hop.add_frame(_out(0))
    assert not _started(ticker)
    hop.add_frame(_out(1))
    assert _started(ticker)
    assert hop.close() == 2


class Due:
    """A ticker target that records its calls."""

    def __init__(self, name: str, calls: list[str], done: threading.Event) -> None:
        self.name, self.calls, self.done = name, calls, done

    def flush_due(self) -> None:
        self.calls.append(self.name)
        if len(self.calls) == 2:
            self.done.set()


def test_ticker_serves_each_target_at_its_own_time() -> None:
    """The running hop and the batch outbox (``asya.outbox``) are scheduled side by side: neither drops the other."""
    clock = Clock()
    ticker = Ticker(monotonic=clock)
    calls: list[str] = []
    done = threading.Event()
    hop, outbox, cancelled = Due("hop", calls, done), Due("outbox", calls, done), Due("cancelled", calls, done)
    ticker.schedule(cancelled, clock.now + 1.0)
    ticker.cancel(cancelled)
    clock.now += 5.0
    ticker.schedule(outbox, clock.now - 1.0)
    ticker.schedule(hop, clock.now)
    assert done.wait(timeout=10)
    assert calls == ["outbox", "hop"], "the earliest first, each once"


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
