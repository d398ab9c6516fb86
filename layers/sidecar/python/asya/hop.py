"""Output of one handler call: frames and FLY values, buffered and flushed on time (P-ROUTE-9, P-STAT-16).

- Frames wait in yield order and leave in one ``send_frames(batch)`` call as soon as 10 are waiting, no later than
  1 s after the oldest waiting one was yielded, and when the call ends (:meth:`HopOutput.close`).
- FLY values wait per task and leave in one ``send_fly(values)`` call at most every 100 ms, and on :meth:`close`
  (so they precede any later status write of the hop). The hop's first value opens the first 100 ms window rather
  than leaving at once, so a call that ends within it sends all its values in the one flush of :meth:`close`; live
  output still leaves within 100 ms, below the gateway's 250 ms poll (GW-SSE-9).
- Deadlines that pass while the handler is busy are served by a :class:`Ticker`: one daemon thread per runtime,
  started on first use, which calls :meth:`HopOutput.flush_due` (and the batch outbox's, ``asya.outbox``; each
  target keeps its own time). With ``schedule_first=False`` (handlers declared as
  plain functions, whose single frame arrives when the call ends) the ticker is woken only from the second frame on,
  so the common one-frame hop costs no thread wake-up. A send error on that thread is kept and re-raised
  by :meth:`close` on the caller's thread; after a frame send error no further frame is sent (the record fails and
  is delivered again). ``send_fly`` is expected to swallow its own failures (FLY is best effort, P-STAT-7); anything
  it raises is kept like a frame error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from asya.routing import Outgoing

__all__ = ["FLY_INTERVAL", "FRAME_BATCH", "FRAME_MAX_WAIT", "Flushable", "HopOutput", "Ticker"]

FRAME_BATCH: Final = 10
FRAME_MAX_WAIT: Final = 1.0
FLY_INTERVAL: Final = 0.1
_NEVER: Final = float("-inf")


class Flushable(Protocol):
    """What a :class:`Ticker` serves: a :class:`HopOutput`, or the batch's ``asya.outbox.Outbox``."""

    def flush_due(self) -> None: ...


class Ticker:
    """Calls ``target.flush_due()`` when a target's scheduled time passes; one background thread, started lazily.
    Each target keeps its own earliest time (the running hop and the batch's outbox are served side by side)."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._due: dict[Flushable, float] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, target: Flushable, due: float) -> None:
        with self._cond:
            current = self._due.get(target)
            if current is not None and current <= due:
                return
            self._due[target] = due
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="asya-hop-ticker", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, target: Flushable) -> None:
        with self._cond:
            self._due.pop(target, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._due:
                        self._cond.wait()
                        continue
                    # no reference to a target while waiting: a finished batch's outbox (and its envelopes) must
                    # not outlive the invocation because it is still the earliest entry (peak memory, `make bench`)
                    wait = min(self._due.values()) - self._monotonic()
                    if wait <= 0:
                        target = min(self._due, key=self._due.__getitem__)
                        del self._due[target]
                        break
                    self._cond.wait(wait)
            target.flush_due()
            del target


class HopOutput:
    """Frames and FLY values of one handler call. Thread-safe: the ticker thread may flush concurrently."""

    def __init__(
        self,
        *,
        send_frames: Callable[[list[Outgoing]], None],
        send_fly: Callable[[list[Any]], None] | None,
        ticker: Ticker | None,
        schedule_first: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send_frames = send_frames
        self._send_fly = send_fly
        self._ticker = ticker
        self._schedule_first = schedule_first
        self._added = 0
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._frames: list[Outgoing] = []
        self._frames_since = 0.0
        self._fly: list[Any] = []
        self._fly_last = _NEVER
        self._error: BaseException | None = None
        self._closed = False
        self.frames_sent = 0

    def add_frame(self, outgoing: Outgoing) -> None:
        with self._lock:
            if self._error is not None:
                return
            if not self._frames:
                self._frames_since = self._monotonic()
            self._frames.append(outgoing)
            self._added += 1
            if len(self._frames) >= FRAME_BATCH:
                self._flush_frames()
                return
        if self._ticker is not None and (self._schedule_first or self._added > 1):
            self._ticker.schedule(self, self._frames_since + FRAME_MAX_WAIT)

    def add_fly(self, value: Any) -> None:
        if self._send_fly is None:
            return
        with self._lock:
            now = self._monotonic()
            if self._fly_last == _NEVER:  # the first value opens a window: a short call flushes once, on close
                self._fly_last = now
            self._fly.append(value)
            due = self._fly_last + FLY_INTERVAL
            if now >= due:
                self._flush_fly()
                return
        if self._ticker is not None:
            self._ticker.schedule(self, due)

    def flush_due(self) -> None:
        """Send what is due now; called by the ticker thread. Never raises."""
        with self._lock:
            if self._closed:
                return
            now = self._monotonic()
            if self._fly and now >= self._fly_last + FLY_INTERVAL:
                self._flush_fly()
            if self._frames and now >= self._frames_since + FRAME_MAX_WAIT:
                self._flush_frames()
            pending: list[float] = []
            if self._fly:
                pending.append(self._fly_last + FLY_INTERVAL)
            if self._frames:
                pending.append(self._frames_since + FRAME_MAX_WAIT)
        if pending and self._ticker is not None:
            self._ticker.schedule(self, min(pending))

    def close(self) -> int:
        """Flush everything (FLY first, then frames); return the number of frames sent or raise the first error."""
        if self._ticker is not None:
            self._ticker.cancel(self)
        with self._lock:
            self._closed = True
            if self._fly:
                self._flush_fly()
            if self._frames:
                self._flush_frames()
            if self._error is not None:
                raise self._error
            return self.frames_sent

    def _flush_frames(self) -> None:
        batch, self._frames = self._frames, []
        if self._error is not None:
            return
        try:
            self._send_frames(batch)
        except Exception as exc:  # kept for close(): the record fails on the caller's thread
            self._error = exc
            return
        self.frames_sent += len(batch)

    def _flush_fly(self) -> None:
        values, self._fly = self._fly, []
        self._fly_last = self._monotonic()
        assert self._send_fly is not None
        try:
            self._send_fly(values)
        except Exception as exc:
            self._error = self._error or exc
