"""Per-call time limits of the user handler (P-TIME-5, P-TIME-7, P-ERR-7).

``effective_limit(actor_timeout=, deadline_left=, lambda_left=)`` is ``T`` of P-TIME-5: the smallest of the actor
timeout, the time left to the task deadline and the Lambda's remaining time minus :data:`SAFETY_MARGIN_SECONDS`, with
the name of the bound that won (ties go to the earlier one in that order), never below 0.

A :class:`CallGuard` enforces one ``T`` over one handler call; the clock starts when the call starts:

- ``guard.call(fn)`` runs synchronous code (a function, a class method, a generator's body) and interrupts it by
  raising :class:`HandlerInterruptError` in its thread when ``T`` elapses. On the main thread (AWS Lambda runs the
  handler there) a ``SIGALRM`` from ``setitimer(ITIMER_REAL)`` delivers it, which also breaks blocking calls
  (``time.sleep``, socket reads). On any other thread (the local mode's event source emulators, tests) a watchdog
  thread delivers it with ``PyThreadState_SetAsyncExc``; CPython raises it at the thread's next bytecode, so a single
  blocking call is interrupted only when it returns (P-TIME-8). The layer owns ``SIGALRM`` and ``ITIMER_REAL`` of
  the main thread while a handler runs.
- ``await guard.bounded(awaitable)`` runs asynchronous code and cancels its task when ``T`` elapses, so the
  interruption lands at the next ``await``.
- ``guard.shielded(callback)`` wraps a layer callback the handler's code calls into (frame and FLY sinks): an
  interruption due while it runs is deferred until it returns, so a send is never cut in half.

Either way the interrupted code sees a ``BaseException`` (not caught by ``except Exception``), generators are closed
on the way out, and the guard raises :class:`HandlerTimeoutError` (an ``Exception``) carrying the limit and, as its
``__cause__``, the interruption with the stack it hit. Code that catches ``BaseException`` and carries on is not
interrupted again, except when it next passes a frame or FLY value. Race freedom: the delivery decision and the
disarming happen under one lock (the signal handler runs on the thread it interrupts), and a delivery still pending
when the call ends is withdrawn, so nothing is ever raised after ``call`` returns. A call that returns normally is a
success even when ``T`` elapsed during its last instructions.
"""

from __future__ import annotations

import heapq
import itertools
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from types import FrameType
from typing import Any, Final, Literal, TypeVar

from asya.exceptions import AsyaError

__all__ = [
    "SAFETY_MARGIN_SECONDS",
    "CallGuard",
    "CallLimit",
    "HandlerInterruptError",
    "HandlerTimeoutError",
    "LimitSource",
    "effective_limit",
]

T = TypeVar("T")
V = TypeVar("V")

#: P-TIME-5, P-TIME-6: seconds kept free of the Lambda's remaining time for the outcome's sends.
SAFETY_MARGIN_SECONDS: Final = 5.0
#: ``setitimer`` treats 0 as "disarm": an already elapsed limit fires after this.
_MIN_TIMER: Final = 1e-6

Mode = Literal["auto", "signal", "thread"]


class LimitSource(StrEnum):
    """Which bound set ``T`` (the wording of the P-TIME-7 message)."""

    ACTOR_TIMEOUT = "actor timeout"
    TASK_DEADLINE = "task deadline"
    LAMBDA_TIME = "Lambda time"


@dataclass(frozen=True, slots=True)
class CallLimit:
    """``T`` of one handler call, in seconds, and the bound it comes from."""

    seconds: float
    source: LimitSource

    @property
    def message(self) -> str:
        """``handler exceeded its <T> s limit (<source>)`` (P-TIME-7)."""
        return f"handler exceeded its {_seconds_text(self.seconds)} s limit ({self.source.value})"


def effective_limit(
    *,
    actor_timeout: float,
    deadline_left: float | None = None,
    lambda_left: float | None = None,
    margin: float = SAFETY_MARGIN_SECONDS,
) -> CallLimit:
    """``T = min(actor timeout, deadline_at - now, Lambda remaining time - margin)``; absent bounds do not count."""
    seconds, source = actor_timeout, LimitSource.ACTOR_TIMEOUT
    # strictly smaller only: of equal bounds the first one named above is the source
    if deadline_left is not None and deadline_left < seconds:
        seconds, source = deadline_left, LimitSource.TASK_DEADLINE
    if lambda_left is not None and lambda_left - margin < seconds:
        seconds, source = lambda_left - margin, LimitSource.LAMBDA_TIME
    return CallLimit(seconds=max(0.0, seconds), source=source)


class HandlerInterruptError(BaseException):
    """Raised inside the handler's code when its time limit elapses.

    A ``BaseException`` so that ``except Exception`` in user code does not swallow it; code that catches it to clean
    up should re-raise it.
    """


class HandlerTimeoutError(AsyaError):
    """The handler call ran past its limit ``T`` and was interrupted: reason ``HandlerTimeout`` (P-ERR-7)."""

    def __init__(self, limit: CallLimit) -> None:
        super().__init__(limit.message)
        self.limit = limit


class CallGuard:
    """Enforces one :class:`CallLimit` over one handler call; see the module docstring.

    ``mode`` picks the delivery of synchronous interruptions: ``"auto"`` uses ``SIGALRM`` on the main thread and the
    watchdog elsewhere; ``"signal"`` (main thread only) and ``"thread"`` force one.
    """

    def __init__(self, limit: CallLimit, *, mode: Mode = "auto") -> None:
        self.limit = limit
        self._mode = mode
        # Reentrant: the SIGALRM handler runs on the thread it interrupts, possibly while that thread holds the lock.
        self._lock = threading.RLock()
        self._due: float | None = None
        self._armed = False
        self._depth = 0
        self._expired = False
        self._delivered = False
        self._delivery: _SignalDelivery | _ThreadDelivery | None = None

    # -- synchronous code ----------------------------------------------------------------------------------------

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, interrupted when the limit elapses; raises :class:`HandlerTimeoutError` then."""
        try:
            try:
                self._arm()
                return fn()
            finally:
                self._disarm()
        except HandlerInterruptError as exc:
            self._disarm()  # the interruption may have landed inside the first _disarm
            raise HandlerTimeoutError(self.limit) from exc

    def shielded(self, callback: Callable[[V], None]) -> Callable[[V], None]:
        """``callback`` made atomic with respect to the interruption; an interruption due meanwhile follows it."""

        def run_shielded(value: V) -> None:
            self._enter_shield()
            try:
                callback(value)
            except BaseException:
                self._leave_shield(raising=True)
                raise
            self._leave_shield(raising=False)

        return run_shielded

    def _arm(self) -> None:
        delivery = self._choose_delivery()
        with self._lock:
            if self._due is None:
                self._due = time.monotonic() + self.limit.seconds
            self._armed, self._delivery = True, delivery
            due = self._due
        delivery.start(self, due)

    def _disarm(self) -> None:
        with self._lock:
            delivery, self._armed = self._delivery, False
            if delivery is not None and self._delivered:
                delivery.withdraw()
        if delivery is not None:
            delivery.stop(self)

    def _fire(self) -> None:
        """The limit elapsed: interrupt now when the handler's own code runs, else when the shield is left."""
        with self._lock:  # delivering under the lock: _disarm cannot slip in between and miss a pending one
            self._expired = True
            if not self._armed or self._depth or self._delivered or self._delivery is None:
                return
            self._delivered = True
            self._delivery.deliver()

    def _enter_shield(self) -> None:
        with self._lock:
            interrupt = self._armed and self._expired
            if interrupt:
                self._delivered = True
                if self._delivery is not None:
                    self._delivery.withdraw()  # raised right here instead of wherever it would land
            else:
                self._depth += 1
        if interrupt:
            raise HandlerInterruptError

    def _leave_shield(self, *, raising: bool) -> None:
        with self._lock:
            self._depth -= 1
            interrupt = not raising and self._depth == 0 and self._armed and self._expired
            if interrupt:
                self._delivered = True
        if interrupt:
            raise HandlerInterruptError

    def _choose_delivery(self) -> _SignalDelivery | _ThreadDelivery:
        on_main = threading.current_thread() is threading.main_thread()
        mode = self._mode
        if mode == "auto":
            mode = "signal" if on_main and hasattr(signal, "setitimer") else "thread"
        if mode == "signal":
            if not on_main:
                raise RuntimeError("CallGuard(mode='signal') works on the main thread only")
            return _SignalDelivery()
        return _ThreadDelivery(threading.get_ident())

    # -- asynchronous code ---------------------------------------------------------------------------------------

    async def bounded(self, awaitable: Awaitable[T]) -> T:
        """``await awaitable``, its task cancelled when the limit elapses; raises :class:`HandlerTimeoutError` then."""
        import asyncio  # only async handlers pay for the import (cold start)

        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("CallGuard.bounded must run inside an asyncio task")
        with self._lock:
            if self._due is None:
                self._due = time.monotonic() + self.limit.seconds
            left = self._due - time.monotonic()
        timer = asyncio.get_running_loop().call_later(max(0.0, left), self._cancel, task)
        try:
            return await awaitable
        except BaseException as exc:
            if not self._expired:
                raise
            task.uncancel()
            raise HandlerTimeoutError(self.limit) from exc
        finally:
            timer.cancel()

    def _cancel(self, task: Any) -> None:
        self._expired = True
        task.cancel()


# -- delivery ------------------------------------------------------------------------------------------------------


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> int:
    """``PyThreadState_SetAsyncExc``: ``exc`` is raised in that thread at its next bytecode; ``None`` withdraws a
    pending one (ctypes passes ``None`` as NULL)."""
    import ctypes  # only the thread delivery needs it; on Lambda's main thread it would cost cold-start time

    arg = ctypes.py_object(exc) if exc is not None else None
    return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), arg))


class _ThreadDelivery:
    """The watchdog thread fires the guard; the interruption is raised asynchronously in the handler's thread."""

    __slots__ = ("_thread_id", "_ticket")

    def __init__(self, thread_id: int) -> None:
        self._thread_id = thread_id
        self._ticket = -1

    def start(self, guard: CallGuard, due: float) -> None:
        self._ticket = _watchdog().add(guard, due)

    def stop(self, guard: CallGuard) -> None:
        _watchdog().remove(self._ticket)

    def deliver(self) -> None:
        _set_async_exc(self._thread_id, HandlerInterruptError)

    def withdraw(self) -> None:
        _set_async_exc(self._thread_id, None)


class _SignalDelivery:
    """``ITIMER_REAL`` fires ``SIGALRM``; its handler raises the interruption on the main thread, where it runs."""

    __slots__ = ()

    def start(self, guard: CallGuard, due: float) -> None:
        _install_alarm_handler()
        global _ALARM_GUARD  # noqa: PLW0603 - one handler call at a time on the main thread
        _ALARM_GUARD = guard
        signal.setitimer(signal.ITIMER_REAL, max(_MIN_TIMER, due - time.monotonic()))

    def stop(self, guard: CallGuard) -> None:
        global _ALARM_GUARD  # noqa: PLW0603
        signal.setitimer(signal.ITIMER_REAL, 0)
        if _ALARM_GUARD is guard:
            _ALARM_GUARD = None

    def deliver(self) -> None:
        raise HandlerInterruptError

    def withdraw(self) -> None:
        """Nothing to withdraw: the handler raised the interruption when it ran."""


_ALARM_GUARD: CallGuard | None = None
_ALARM_INSTALLED = False
_PREVIOUS_ALARM: Any = None


def _install_alarm_handler() -> None:
    """Install the ``SIGALRM`` handler once and keep it: restoring the default disposition would let an alarm
    already in flight terminate the process."""
    global _ALARM_INSTALLED, _PREVIOUS_ALARM  # noqa: PLW0603
    if not _ALARM_INSTALLED:
        _PREVIOUS_ALARM = signal.signal(signal.SIGALRM, _on_alarm)
        _ALARM_INSTALLED = True


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    guard = _ALARM_GUARD
    if guard is not None:
        guard._fire()
    elif callable(_PREVIOUS_ALARM):  # an alarm of someone else's, outside any handler call
        _PREVIOUS_ALARM(signum, frame)


class _Watchdog:
    """One daemon thread per process firing guards when they are due; started on first use."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, CallGuard]] = []
        self._live: set[int] = set()
        self._tickets = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, guard: CallGuard, due: float) -> int:
        with self._cond:
            ticket = next(self._tickets)
            heapq.heappush(self._heap, (due, ticket, guard))
            self._live.add(ticket)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="asya-call-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
            return ticket

    def remove(self, ticket: int) -> None:
        with self._cond:
            self._live.discard(ticket)

    def _run(self) -> None:
        while True:
            with self._cond:
                guard = self._next_due()
            guard._fire()  # a guard disarmed meanwhile ignores this, under its own lock

    def _next_due(self) -> CallGuard:
        while True:
            while self._heap and self._heap[0][1] not in self._live:
                heapq.heappop(self._heap)
            if not self._heap:
                self._cond.wait()
                continue
            due, ticket, guard = self._heap[0]
            wait = due - time.monotonic()
            if wait <= 0:
                heapq.heappop(self._heap)
                self._live.discard(ticket)
                return guard
            self._cond.wait(wait)


_WATCHDOG: _Watchdog | None = None
_WATCHDOG_LOCK: Final = threading.Lock()


def _watchdog() -> _Watchdog:
    global _WATCHDOG  # noqa: PLW0603 - one per process, created on first use
    with _WATCHDOG_LOCK:
        if _WATCHDOG is None:
            _WATCHDOG = _Watchdog()
        return _WATCHDOG


def _seconds_text(seconds: float) -> str:
    """``1``, ``1.5``, ``0.25``, ``297.123``: at most three decimals, no trailing zeros."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")
