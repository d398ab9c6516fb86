"""Clocks tests move by hand: ``ManualClock``, injected wherever the code under test takes a ``Clock``
(``asya.timeutil``), and ``SqsClock``, the clock of in-process moto's SQS (visibility timeouts, delays)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest


class ManualClock:
    """Answers ``now`` until a test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 0.0, **delta: float) -> None:
        self.now += timedelta(seconds=seconds, **delta)


class SqsClock:
    """The clock of moto's SQS models in this process (``mock_aws``): the wall time at install, then
    ``time.monotonic``'s progress plus what the test skipped with :meth:`advance`. A visibility timeout or a delay
    ends when the test skips past it, not when the machine gets there; long polls still end in real time.

    :meth:`install` replaces ``unix_time`` and ``unix_time_millis`` in ``moto.sqs.models`` (moto 5.2.5 reads every
    SQS timestamp through them) through ``monkeypatch``, which fails loudly if moto renames them."""

    def __init__(self) -> None:
        self._wall = time.time()
        self._start = time.monotonic()
        self.skipped = 0.0

    def advance(self, seconds: float) -> None:
        """Skip ``seconds`` of SQS time: every timer that ends within them has ended."""
        self.skipped += seconds

    def unix_time(self, dt: datetime | None = None) -> float:
        if dt is not None:  # a given date, not "now": moto's own conversion
            from moto.core.utils import unix_time

            return float(unix_time(dt))
        return self._wall + (time.monotonic() - self._start) + self.skipped

    def unix_time_millis(self, dt: datetime | None = None) -> float:
        return self.unix_time(dt) * 1000.0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> SqsClock:
        import moto.sqs.models

        monkeypatch.setattr(moto.sqs.models, "unix_time", self.unix_time)
        monkeypatch.setattr(moto.sqs.models, "unix_time_millis", self.unix_time_millis)
        return self
