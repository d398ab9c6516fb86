"""Task progress of one hop (PROTOCOL P-STAT-8).

For a hop whose input route is ``prev``/``next``: ``k = len(prev) + 1`` and ``N = k + len(next)``; ``received`` is
``(k - 1 + 0.1) / N * 100``, ``processing`` ``(k - 1 + 0.5) / N * 100``, ``completed`` ``k / N * 100``; ``retrying``
leaves progress unchanged (``None``). Values are capped at 100 and rounded half up to one decimal, computed with exact
fractions so that ``x.x5`` always rounds up. The store keeps the maximum (P-STAT-9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Final

__all__ = ["RUNNING_STEPS", "hop_progress"]

#: The steps of a ``running`` event (P-STAT-6).
RUNNING_STEPS: Final = ("received", "processing", "completed", "retrying")

_STEP_FRACTION: Final = {
    "received": Fraction(1, 10),
    "processing": Fraction(1, 2),
    "completed": Fraction(1),
}


def hop_progress(step: str, prev: Sequence[str], next: Sequence[str]) -> float | None:
    """Progress percent of ``step`` for a hop with input route ``prev``/``next``; ``None`` for ``retrying``.

    Raises ``ValueError`` naming the step when it is not one of :data:`RUNNING_STEPS`.
    """
    if step == "retrying":
        return None
    fraction = _STEP_FRACTION.get(step)
    if fraction is None:
        raise ValueError(f"step: unknown running step {step!r}: use one of {', '.join(RUNNING_STEPS)}")
    k = len(prev) + 1
    total = k + len(next)
    percent = min((k - 1 + fraction) / total * 100, Fraction(100))
    return math.floor(percent * 10 + Fraction(1, 2)) / 10
