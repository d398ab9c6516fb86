"""Task progress of one hop (P-STAT-8).

For a hop whose input route is ``prev``/``next``: ``k = len(prev) + 1`` and ``N = k + len(next)``; ``received`` is
``(k - 1 + 0.1) / N * 100``, ``processing`` ``(k - 1 + 0.5) / N * 100``, ``completed`` ``k / N * 100``; ``retrying``
leaves progress unchanged (``None``). Values are capped at 100 and rounded half up to one decimal, computed in exact
integer arithmetic (tenths of a hop), so ``x.x5`` always rounds up. The store keeps the maximum (P-STAT-9).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["RUNNING_STEPS", "hop_progress"]

#: The steps of a ``running`` event (P-STAT-6).
RUNNING_STEPS: Final = ("received", "processing", "completed", "retrying")

#: How far into its hop each step is, in tenths of a hop. Integers: this runs on every status write of the hot path.
_STEP_TENTHS: Final = {"received": 1, "processing": 5, "completed": 10}


def hop_progress(step: str, prev: Sequence[str], next: Sequence[str]) -> float | None:
    """Progress percent of ``step`` for a hop with input route ``prev``/``next``; ``None`` for ``retrying``.

    Raises ``ValueError`` naming the step when it is not one of :data:`RUNNING_STEPS`.
    """
    if step == "retrying":
        return None
    tenths = _STEP_TENTHS.get(step)
    if tenths is None:
        raise ValueError(f"step: unknown running step {step!r}: use one of {', '.join(RUNNING_STEPS)}")
    k = len(prev) + 1
    total = k + len(next)
    hop_tenths = (k - 1) * 10 + tenths
    # percent * 10 = hop_tenths / (10 * total) * 1000; floor(x + 1/2) of it, in integers
    permille = (2 * 100 * hop_tenths + total) // (2 * total)
    return min(permille, 1000) / 10
