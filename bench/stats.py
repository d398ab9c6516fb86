"""Summary statistics of benchmark samples: pure functions, no I/O, no clocks.

Percentiles use linear interpolation between closest ranks (the "type 7" estimator of R and NumPy's default), so
``percentile(xs, 50)`` is the usual median. Every figure the report shows comes with its spread: ``summarize`` gives
the median, the 5th and 95th percentiles, min, max and the sample count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Summary", "median", "percentile", "ratio", "summarize"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``samples``, linearly interpolated; raises ``ValueError`` when empty."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100 or math.isnan(q):
        raise ValueError(f"percentile q must be within 0..100, got {q!r}")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return float(ordered[low])
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50)


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, or ``None`` when the denominator is zero (a ratio that does not exist)."""
    return None if denominator == 0 else numerator / denominator


@dataclass(frozen=True, slots=True)
class Summary:
    """Median and spread of one set of samples, in the samples' unit."""

    n: int
    median: float
    p5: float
    p95: float
    min: float
    max: float

    def scaled(self, factor: float) -> Summary:
        """The same summary in another unit (``factor`` multiplies every figure)."""
        return Summary(
            n=self.n,
            median=self.median * factor,
            p5=self.p5 * factor,
            p95=self.p95 * factor,
            min=self.min * factor,
            max=self.max * factor,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(samples: Sequence[float]) -> Summary:
    """Median, 5th/95th percentiles, min and max of ``samples``; raises ``ValueError`` when empty."""
    if not samples:
        raise ValueError("summary of no samples")
    return Summary(
        n=len(samples),
        median=median(samples),
        p5=percentile(samples, 5),
        p95=percentile(samples, 95),
        min=float(min(samples)),
        max=float(max(samples)),
    )
