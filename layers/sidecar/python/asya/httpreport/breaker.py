"""A circuit breaker per gateway origin (P-STAT-18).

After ``threshold`` (3) consecutive failures (a connection error, a timeout or a 5xx answer) the breaker opens for
``pause`` (60) seconds: requests to that origin are skipped (posts dropped, pre-flight reads treated as unknown), so a
gateway that is down or hangs costs at most three timeouts a minute. Once the pause is over one request goes through:
a success closes the breaker, a failure opens it again for another pause. Any answer below 500 is a success here (the
gateway is up; a 4xx is the request's own problem). Thread-safe: the poster thread and the pre-flight readers share it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["FAILURE_THRESHOLD", "PAUSE_SECONDS", "CircuitBreaker"]

FAILURE_THRESHOLD: Final = 3
PAUSE_SECONDS: Final = 60.0


class CircuitBreaker:
    """Consecutive-failure breaker; ``monotonic`` is injectable for tests."""

    def __init__(
        self,
        *,
        threshold: int = FAILURE_THRESHOLD,
        pause: float = PAUSE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        self._threshold = threshold
        self._pause = pause
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until = 0.0

    @property
    def pause(self) -> float:
        return self._pause

    def allow(self) -> bool:
        """False while open."""
        with self._lock:
            return self._failures < self._threshold or self._monotonic() >= self._open_until

    def is_open(self) -> bool:
        return not self.allow()

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._open_until = 0.0

    def failure(self) -> bool:
        """Count a failure; True when this one opened the breaker."""
        with self._lock:
            self._failures += 1
            if self._failures >= self._threshold:
                self._failures = self._threshold  # the trial after a pause re-opens it at once
                self._open_until = self._monotonic() + self._pause
                return True
            return False
