"""The deadline backstop of the local mode: the gateway's :class:`asya_gateway.backstop.Backstop` swept from a daemon
thread every ``interval`` seconds (GW-BACK-1: 5 s locally), where AWS runs it from an EventBridge schedule.

The first sweep runs one interval after ``start``. A sweep that raises (moto unreachable, a bug) is logged and the
loop goes on, as the next scheduled Lambda run would. ``stop`` wakes the thread at once and waits for a sweep in
progress to finish its current task. No EMF metric is printed locally.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING, Final

from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    from asya_gateway.backstop import Backstop, SweepResult

__all__ = ["DEFAULT_BACKSTOP_INTERVAL", "BackstopLoop"]

#: GW-BACK-1 (local mode).
DEFAULT_BACKSTOP_INTERVAL: Final = 5.0

_log = logging.getLogger(__name__)


class BackstopLoop:
    """Runs ``backstop.sweep()`` every ``interval`` seconds on a daemon thread between ``start`` and ``stop``."""

    def __init__(self, backstop: Backstop, *, interval: float = DEFAULT_BACKSTOP_INTERVAL) -> None:
        if not interval > 0:
            raise LocalModeError(f"backstop interval must be > 0 seconds, got {interval!r}")
        self._backstop = backstop
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sweeps = 0
        self._last: SweepResult | None = None

    @property
    def sweeps(self) -> int:
        """Sweeps completed (with or without an error) since ``start``."""
        with self._lock:
            return self._sweeps

    @property
    def last_result(self) -> SweepResult | None:
        with self._lock:
            return self._last

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise LocalModeError("the backstop loop is already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="asya-backstop", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout)
        if thread.is_alive():
            raise LocalModeError(f"the backstop sweep did not finish within {timeout} s")

    def _time_left(self) -> float:
        # A stop request ends a long sweep between two tasks instead of waiting for the whole index.
        return 0.0 if self._stop.is_set() else math.inf

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            result: SweepResult | None = None
            try:
                result = self._backstop.sweep(time_left=self._time_left)
            except Exception:
                _log.exception("backstop sweep failed; retrying in %s s", self._interval)
            else:
                if result.timed_out or result.errors:
                    _log.warning("backstop sweep: %s", result.to_dict())
            with self._lock:
                self._sweeps += 1
                if result is not None:
                    self._last = result
