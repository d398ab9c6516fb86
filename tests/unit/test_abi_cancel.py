"""Cancel that reaches running work (docs/protocol.md P-CANCEL-1..5 (R3)): ``TaskCanceledError`` thrown at the next
yield of a generator handler, and the cancel reads' cadence with an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from asya import TaskCanceledError
from asya.abi import AbiState, Frame, Handler
from asya.cancelwatch import CANCEL_READ_INTERVAL_SECONDS, CancelWatch

pytestmark = pytest.mark.unit


def _state() -> AbiState:
    return AbiState(id="t-1", prev=[], curr="me", next=["post"], headers={}, status={"phase": "processing"})


class _Switch:
    """A cancel check the test flips; counts how often the layer asked."""

    def __init__(self) -> None:
        self.on = False
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.on


def test_p_cancel_1_generator_gets_task_canceled_error_at_its_next_yield() -> None:
    switch, seen, frames = _Switch(), [], []

    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield {"n": 1}
            switch.on = True  # canceled while the generator runs
            yield {"n": 2}  # the throw lands here: this frame is not passed on
            seen.append("after the canceled yield")
        except TaskCanceledError:
            seen.append("cleaned up")
            raise

    with pytest.raises(TaskCanceledError):
        Handler(handler).run(None, _state(), on_frame=frames.append, on_fly=lambda _: None, cancel=switch)
    assert seen == ["cleaned up"]
    assert [f.payload for f in frames] == [{"n": 1}]


def test_p_cancel_1_a_generator_that_swallows_the_cancel_is_closed_and_still_canceled() -> None:
    switch, closed = _Switch(), []
    switch.on = True

    def handler(payload: Any) -> Iterator[Any]:
        try:
            while True:
                try:
                    yield None
                except TaskCanceledError:
                    yield {"late": True}  # keeps going: the layer closes it
        finally:
            closed.append(True)

    frames: list[Frame] = []
    with pytest.raises(TaskCanceledError):
        Handler(handler).run(None, _state(), on_frame=frames.append, on_fly=lambda _: None, cancel=switch)
    assert closed == [True]
    assert frames == []


def test_p_cancel_1_a_cleanup_error_still_ends_canceled() -> None:
    switch = _Switch()
    switch.on = True

    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield None
        except TaskCanceledError:
            raise RuntimeError("cleanup broke") from None

    with pytest.raises(TaskCanceledError):
        Handler(handler).run(None, _state(), on_frame=lambda _: None, on_fly=lambda _: None, cancel=switch)


def test_p_cancel_1_async_generator_gets_it_at_its_next_yield() -> None:
    switch, seen = _Switch(), []

    async def handler(payload: Any) -> AsyncIterator[Any]:
        try:
            yield None
            switch.on = True
            await asyncio.sleep(0)
            yield {"n": 2}
        except TaskCanceledError:
            seen.append("cleaned up")
            raise

    handle = Handler(handler)
    try:
        with pytest.raises(TaskCanceledError):
            handle.run(None, _state(), on_frame=lambda _: None, on_fly=lambda _: None, cancel=switch)
    finally:
        handle.close()
    assert seen == ["cleaned up"]


def test_p_cancel_4_plain_functions_are_never_asked_and_run_to_their_end() -> None:
    switch = _Switch()
    switch.on = True
    frames: list[Frame] = []
    Handler(lambda payload: {"done": True}).run(
        None, _state(), on_frame=frames.append, on_fly=lambda _: None, cancel=switch
    )
    assert switch.asked == 0
    assert [f.payload for f in frames] == [{"done": True}]


class _Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_p_cancel_3_one_read_per_interval_per_invocation_counted_from_the_preflight() -> None:
    clock, reads = _Monotonic(), []

    def read(task_id: str) -> str | None:
        reads.append(task_id)
        return "running"

    watch = CancelWatch(read=read, monotonic=clock)
    check = watch.check_for("t-1")
    assert CANCEL_READ_INTERVAL_SECONDS == 5.0
    clock.now += 4.9
    assert [check() for _ in range(50)] == [False] * 50
    assert reads == []  # the pre-flight read at the batch's start is fresh enough
    clock.now += 0.1
    assert check() is False
    assert reads == ["t-1"]
    clock.now += 2.0
    assert watch.canceled("t-2") is False  # another task of the same invocation shares the cadence
    assert reads == ["t-1"]
    clock.now += 3.0
    assert watch.canceled("t-2") is False
    assert (reads, watch.reads) == (["t-1", "t-2"], 2)


def test_p_cancel_3_a_canceled_task_stays_canceled_without_more_reads() -> None:
    clock, statuses = _Monotonic(), iter(["running", "canceled"])
    watch = CancelWatch(read=lambda _: next(statuses), monotonic=clock)
    clock.now += 5
    assert watch.canceled("t-1") is False
    clock.now += 5
    assert watch.canceled("t-1") is True
    assert [watch.canceled("t-1") for _ in range(3)] == [True, True, True]
    assert watch.reads == 2


def test_p_cancel_3_a_failed_read_lets_the_handler_go_on() -> None:
    from botocore.exceptions import ClientError

    def read(task_id: str) -> str | None:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}}, "GetItem")

    clock = _Monotonic()
    watch = CancelWatch(read=read, monotonic=clock)
    clock.now += 5
    assert watch.canceled("t-1") is False
