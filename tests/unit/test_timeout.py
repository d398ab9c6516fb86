"""Per-call time limits (P-TIME-5, P-TIME-7, P-ERR-7): the effective limit and the interruption mechanism.

Interruptions use real limits of a quarter second, long enough that a call meant to finish within its limit does so
even on a loaded machine; tests assert outcomes, never durations. Code that should be
interrupted sleeps in short steps for up to ``LONG`` seconds, so a broken mechanism fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler, HandlerError
from asya.timeout import (
    SAFETY_MARGIN_SECONDS,
    CallGuard,
    CallLimit,
    HandlerInterruptError,
    HandlerTimeoutError,
    LimitSource,
    effective_limit,
)

pytestmark = pytest.mark.unit

LONG = 20.0
SHORT = CallLimit(0.25, LimitSource.ACTOR_TIMEOUT)
#: Outlasts ``SHORT``: a timer left armed after a call would fire within this.
PAST_SHORT = 0.4
ON_MAIN = threading.current_thread() is threading.main_thread()
needs_main = pytest.mark.skipif(not ON_MAIN, reason="SIGALRM delivery works on the main thread only")


def sleep_long(swallowed: list[str] | None = None) -> None:
    """Sleeps in short steps and, like careless user code, swallows every ``Exception``."""
    end = time.monotonic() + LONG
    while time.monotonic() < end:
        try:
            time.sleep(0.005)
        except Exception:
            if swallowed is not None:
                swallowed.append("swallowed")


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a fresh thread; return its result or raise what it raised."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def run_in(where: str, fn: Callable[[CallGuard], Any], limit: CallLimit = SHORT) -> Any:
    """``fn(guard)`` with a guard delivering as ``where`` says: ``signal``/``thread`` on the main thread, or ``auto``
    on a worker thread (the local mode's case)."""
    if where == "worker":
        return in_thread(lambda: fn(CallGuard(limit)))
    if where == "signal" and not ON_MAIN:
        pytest.skip("SIGALRM delivery works on the main thread only")
    return fn(CallGuard(limit, mode="signal" if where == "signal" else "thread"))


WHERE = ["signal", "thread", "worker"]


def spin(seconds: float) -> int:
    """Busy Python code for ``seconds``: any pending asynchronous exception is raised here."""
    count = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        count += 1
    return count


# -- P-TIME-5: the effective limit ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "deadline", "lambda_left", "expected"),
    [
        (30.0, None, None, CallLimit(30.0, LimitSource.ACTOR_TIMEOUT)),
        (30.0, 12.5, 300.0, CallLimit(12.5, LimitSource.TASK_DEADLINE)),
        (30.0, 120.0, 20.0, CallLimit(15.0, LimitSource.LAMBDA_TIME)),
        (30.0, None, 31.0, CallLimit(26.0, LimitSource.LAMBDA_TIME)),
        (10.0, 10.0, 15.0, CallLimit(10.0, LimitSource.ACTOR_TIMEOUT)),
        (30.0, 15.0, 20.0, CallLimit(15.0, LimitSource.TASK_DEADLINE)),
        (30.0, 60.0, 3.0, CallLimit(0.0, LimitSource.LAMBDA_TIME)),
        (30.0, -2.0, None, CallLimit(0.0, LimitSource.TASK_DEADLINE)),
    ],
)
def test_p_time_5_effective_limit_is_the_smallest_bound(
    actor: float, deadline: float | None, lambda_left: float | None, expected: CallLimit
) -> None:
    assert effective_limit(actor_timeout=actor, deadline_left=deadline, lambda_left=lambda_left) == expected


def test_p_time_5_safety_margin_is_five_seconds() -> None:
    assert SAFETY_MARGIN_SECONDS == 5.0
    assert effective_limit(actor_timeout=60, lambda_left=35, margin=1.0) == CallLimit(34.0, LimitSource.LAMBDA_TIME)


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        (CallLimit(1.0, LimitSource.ACTOR_TIMEOUT), "handler exceeded its 1 s limit (actor timeout)"),
        (CallLimit(1.5, LimitSource.LAMBDA_TIME), "handler exceeded its 1.5 s limit (Lambda time)"),
        (CallLimit(297.12345, LimitSource.TASK_DEADLINE), "handler exceeded its 297.123 s limit (task deadline)"),
        (CallLimit(0.0, LimitSource.LAMBDA_TIME), "handler exceeded its 0 s limit (Lambda time)"),
    ],
)
def test_p_time_7_message_names_the_limit_and_its_source(limit: CallLimit, message: str) -> None:
    assert limit.message == message
    assert str(HandlerTimeoutError(limit)) == message


def test_p_time_7_the_interruption_is_not_an_exception() -> None:
    assert issubclass(HandlerInterruptError, BaseException)
    assert not issubclass(HandlerInterruptError, Exception)
    assert issubclass(HandlerTimeoutError, Exception)


# -- P-TIME-7: interrupting synchronous code ------------------------------------------------------------------------


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_sync_code_is_interrupted_and_except_exception_does_not_swallow_it(where: str) -> None:
    swallowed: list[str] = []
    with pytest.raises(HandlerTimeoutError) as caught:
        run_in(where, lambda guard: guard.call(lambda: sleep_long(swallowed)))
    assert caught.value.limit == SHORT
    assert str(caught.value) == "handler exceeded its 0.25 s limit (actor timeout)"
    assert isinstance(caught.value.__cause__, HandlerInterruptError)
    assert swallowed == []


@needs_main
def test_p_time_7_sigalrm_breaks_a_single_blocking_sleep() -> None:
    """On the main thread (AWS Lambda) a blocking call is interrupted, not only code between bytecodes."""
    guard = CallGuard(SHORT)
    with pytest.raises(HandlerTimeoutError):
        guard.call(lambda: time.sleep(LONG))


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_a_call_within_its_limit_returns_and_nothing_fires_later(where: str) -> None:
    def body(guard: CallGuard) -> int:
        value = guard.call(lambda: 42)
        spin(PAST_SHORT)  # a timer left armed would interrupt this
        return value

    assert run_in(where, body) == 42


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_handler_errors_pass_through_unchanged(where: str) -> None:
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_in(where, lambda guard: guard.call(fail))


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_timer_is_cancelled_race_free_when_the_call_ends_near_the_limit(where: str) -> None:
    """Calls ending just before, at or just after their limit: each one returns or raises HandlerTimeoutError, and
    no interruption ever escapes a call (the spin afterwards would raise it)."""
    outcomes = {"returned": 0, "timed_out": 0}

    def body() -> None:
        for i in range(150):
            guard = CallGuard(
                CallLimit(0.002, LimitSource.ACTOR_TIMEOUT), mode="thread" if where == "thread" else "auto"
            )
            work = 0.001 + (i % 5) * 0.0005
            try:
                guard.call(functools.partial(spin, work))
                outcomes["returned"] += 1
            except HandlerTimeoutError:
                outcomes["timed_out"] += 1
        spin(0.1)

    if where == "worker":
        in_thread(body)
    elif where == "signal" and not ON_MAIN:
        pytest.skip("SIGALRM delivery works on the main thread only")
    else:
        body()
    # the check that matters is that body() did not raise: an interruption escaping a call would surface in a later
    # call or in the final spin. Some calls must have been interrupted, or the near-limit path never ran.
    assert outcomes["timed_out"] > 0
    assert outcomes["returned"] + outcomes["timed_out"] == 150


def test_p_time_7_concurrent_calls_on_several_threads_each_get_their_own_limit() -> None:
    """The local mode runs several actors' handlers at once: one watchdog serves them all. Calls with a short limit
    are interrupted while calls with a long one are still running on other threads; those are left alone and return.
    The long calls end once every short one has been interrupted, so the calls overlap however slow the machine."""
    results: dict[int, str] = {}
    interrupted = threading.Semaphore(0)
    all_interrupted = threading.Event()
    short = [i for i in range(6) if i % 2]

    def wait_for_the_interruptions() -> bool:
        return all_interrupted.wait(LONG)

    def worker(index: int) -> None:
        limit = SHORT if index in short else CallLimit(LONG, LimitSource.ACTOR_TIMEOUT)
        try:
            overlapped = CallGuard(limit).call(sleep_long if index in short else wait_for_the_interruptions)
            results[index] = "returned" if overlapped else "returned, the short calls not all interrupted"
        except HandlerTimeoutError:
            results[index] = "timed out"
            interrupted.release()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for _ in short:
        assert interrupted.acquire(timeout=LONG), "a short call was not interrupted"
    all_interrupted.set()
    for thread in threads:
        thread.join()
    assert results == {i: "timed out" if i in short else "returned" for i in range(6)}


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_a_shielded_callback_finishes_before_the_interruption(where: str) -> None:
    """A frame send that runs past the limit is never cut in half: the interruption follows it."""
    done: list[str] = []

    def send(value: str) -> None:
        time.sleep(PAST_SHORT)  # the limit elapses in here
        spin(0.05)
        done.append(value)

    def body(guard: CallGuard) -> None:
        shielded = guard.shielded(send)
        guard.call(lambda: shielded("frame"))

    with pytest.raises(HandlerTimeoutError):
        run_in(where, body)
    assert done == ["frame"]


@pytest.mark.parametrize("where", WHERE)
def test_p_time_7_code_that_swallows_the_interruption_is_stopped_at_its_next_callback(where: str) -> None:
    reached: list[str] = []

    def handler(shielded: Callable[[str], None]) -> None:
        try:
            sleep_long()
        except BaseException:
            reached.append("swallowed")
        shielded("late frame")

    def body(guard: CallGuard) -> None:
        shielded = guard.shielded(reached.append)
        guard.call(lambda: handler(shielded))

    with pytest.raises(HandlerTimeoutError):
        run_in(where, body)
    assert reached == ["swallowed"], "the late frame is not passed on"


def test_p_time_7_signal_mode_needs_the_main_thread() -> None:
    with pytest.raises(RuntimeError, match="main thread"):
        in_thread(lambda: CallGuard(SHORT, mode="signal").call(lambda: None))


# -- P-TIME-7: asynchronous code ------------------------------------------------------------------------------------


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


def test_p_time_7_async_code_is_cancelled(loop: asyncio.AbstractEventLoop) -> None:
    async def forever() -> None:
        await asyncio.sleep(LONG)

    with pytest.raises(HandlerTimeoutError) as caught:
        loop.run_until_complete(CallGuard(SHORT).bounded(forever()))
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)


def test_p_time_7_async_code_within_its_limit_returns(loop: asyncio.AbstractEventLoop) -> None:
    async def quick() -> str:
        await asyncio.sleep(0)
        return "ok"

    assert loop.run_until_complete(CallGuard(SHORT).bounded(quick())) == "ok"
    loop.run_until_complete(
        asyncio.sleep(PAST_SHORT)
    )  # a timer left behind would have cancelled nothing, raised nothing


def test_p_time_7_async_error_raised_after_the_cancellation_is_a_timeout(loop: asyncio.AbstractEventLoop) -> None:
    async def converts() -> None:
        try:
            await asyncio.sleep(LONG)
        except asyncio.CancelledError:
            raise ValueError("cleanup failed") from None

    with pytest.raises(HandlerTimeoutError):
        loop.run_until_complete(CallGuard(SHORT).bounded(converts()))


# -- Handler.run with a guard: every handler kind (P-ABI-4, P-TIME-7) ------------------------------------------------


def make_state() -> AbiState:
    return AbiState(id="t", prev=[], curr="me", next=["next"], headers={}, status={"phase": "processing"})


@pytest.fixture
def run() -> Iterator[Callable[..., tuple[list[Frame], list[Any]]]]:
    handlers: list[Handler] = []

    def call(target: Callable[[Any], Any], limit: CallLimit = SHORT) -> tuple[list[Frame], list[Any]]:
        handler = Handler(target)
        handlers.append(handler)
        frames: list[Frame] = []
        flies: list[Any] = []
        handler.run({"n": 1}, make_state(), on_frame=frames.append, on_fly=flies.append, guard=CallGuard(limit))
        return frames, flies

    yield call
    for handler in handlers:
        handler.close()


def test_p_time_7_generator_is_closed_and_its_frames_stay_passed() -> None:
    events: list[str] = []

    def gen(payload: Any) -> Iterator[Any]:
        try:
            yield {"frame": 0}
            yield ("FLY", "partial")
            sleep_long()
            yield {"frame": 1}
        finally:
            events.append("closed")

    frames: list[Frame] = []
    handler = Handler(gen)
    with pytest.raises(HandlerTimeoutError):
        handler.run(None, make_state(), on_frame=frames.append, on_fly=events.append, guard=CallGuard(SHORT))
    assert [f.payload for f in frames] == [{"frame": 0}]
    assert events == ["partial", "closed"]


def test_p_time_7_async_generator_is_closed_and_its_frames_stay_passed() -> None:
    events: list[str] = []

    async def agen(payload: Any) -> AsyncIterator[Any]:
        try:
            yield {"frame": 0}
            await asyncio.sleep(LONG)
            yield {"frame": 1}
        finally:
            events.append("closed")

    frames: list[Frame] = []
    handler = Handler(agen)
    try:
        with pytest.raises(HandlerTimeoutError):
            handler.run(None, make_state(), on_frame=frames.append, on_fly=events.append, guard=CallGuard(SHORT))
    finally:
        handler.close()
    assert [f.payload for f in frames] == [{"frame": 0}]
    assert events == ["closed"]


def test_p_time_7_async_function_is_cancelled_and_the_loop_stays_usable() -> None:
    calls: list[str] = []

    async def handler_fn(payload: Any) -> Any:
        calls.append("start")
        if payload == "slow":
            await asyncio.sleep(LONG)
        return {"done": payload}

    handler = Handler(handler_fn)
    frames: list[Frame] = []
    try:
        with pytest.raises(HandlerTimeoutError):
            handler.run("slow", make_state(), on_frame=frames.append, on_fly=frames.append, guard=CallGuard(SHORT))
        # the loop still runs the next call (its guard only a failure bound: the point is not its speed)
        roomy = CallGuard(CallLimit(LONG, LimitSource.ACTOR_TIMEOUT))
        handler.run("fast", make_state(), on_frame=frames.append, on_fly=frames.append, guard=roomy)
    finally:
        handler.close()
    assert [f.payload for f in frames] == [{"done": "fast"}]


def test_p_time_7_fast_handlers_of_every_kind_are_untouched(run: Callable[..., Any]) -> None:
    def function(payload: Any) -> Any:
        return payload

    def generator(payload: Any) -> Iterator[Any]:
        yield ("FLY", 1)
        yield payload

    async def coroutine(payload: Any) -> Any:
        return payload

    async def async_generator(payload: Any) -> AsyncIterator[Any]:
        yield payload

    for target in (function, generator, coroutine, async_generator):
        frames, _ = run(target, CallLimit(5.0, LimitSource.ACTOR_TIMEOUT))
        assert [f.payload for f in frames] == [{"n": 1}], target.__name__
    spin(0.1)


def test_p_time_7_handler_error_under_a_guard_stays_a_handler_error(run: Callable[..., Any]) -> None:
    def boom(payload: Any) -> Any:
        raise KeyError("x")

    with pytest.raises(HandlerError):
        run(boom)
