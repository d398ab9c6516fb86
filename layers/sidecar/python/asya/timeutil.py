"""Timestamps: RFC 3339 UTC with a ``Z`` suffix (P-GEN-3, GW-GEN-6) and manifest durations (P-GEN-4).

A ``Clock`` is any zero-argument callable returning an aware UTC ``datetime``; every component that needs "now" takes
one so tests can inject time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache, lru_cache

__all__ = [
    "Clock",
    "format_ts",
    "format_ts_ms",
    "parse_duration",
    "parse_ts",
    "system_clock",
]

Clock = Callable[[], datetime]

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def system_clock() -> datetime:
    """The real current time, UTC."""
    return datetime.now(UTC)


def format_ts(moment: datetime) -> str:
    """Envelope form: whole seconds, ``Z`` suffix (P-GEN-3)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_ts_ms(moment: datetime) -> str:
    """Task-record form: milliseconds, ``Z`` suffix (GW-GEN-6)."""
    # isoformat, not strftime: about twice as fast (every status write stamps one), and it pads a year below 1000 to
    # four digits as RFC 3339 wants, so parse_ts reads every stamp back
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def parse_ts(value: object) -> datetime | None:
    """Parse any RFC 3339 timestamp into an aware UTC datetime; ``None`` when ``value`` is not one (P-GEN-3)."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_text(value)


@lru_cache(maxsize=1024)
def _parse_text(value: str) -> datetime | None:
    # cached: a hop reads the same few stamps (created_at, deadline_at) several times, and datetimes are immutable
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # "0001-01-01T00:00:00+01:00" is a timestamp before year 1 in UTC: not one we can hold
        return None


@cache
def _duration() -> re.Pattern[str]:
    # compiled on first use, not at import: only durations written with a unit need it
    return re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")


def parse_duration(value: object, *, field: str) -> float:
    """Seconds from a number or a string with a unit suffix ``ms``, ``s``, ``m`` or ``h`` (P-GEN-4).

    Raises ``ValueError`` naming ``field`` and the bad value.
    """
    if isinstance(value, bool):
        raise ValueError(f"{field}: invalid duration {value!r}: use a number of seconds or a string like '90s'")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _duration().match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise ValueError(f"{field}: invalid duration {value!r}: use a number of seconds or a string like '90s'")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{field}: invalid duration {value!r}: must be a finite number >= 0")
    return seconds
