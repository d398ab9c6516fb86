"""A clock tests move by hand, injected wherever the code under test takes a ``Clock`` (``asya.timeutil``)."""

from __future__ import annotations

from datetime import datetime, timedelta


class ManualClock:
    """Answers ``now`` until a test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 0.0, **delta: float) -> None:
        self.now += timedelta(seconds=seconds, **delta)
