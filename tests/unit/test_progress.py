"""P-STAT-8 / P-STAT-9: hop progress from the input route."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from asya.progress import hop_progress

pytestmark = pytest.mark.unit

ROUTE = ["normalize", "analyze", "summarize"]


@pytest.mark.parametrize(
    ("k", "received", "processing", "completed"),
    [(1, 3.3, 16.7, 33.3), (2, 36.7, 50.0, 66.7), (3, 70.0, 83.3, 100.0)],
)
def test_p_stat_9_table(k: int, received: float, processing: float, completed: float) -> None:
    prev, nxt = ROUTE[: k - 1], ROUTE[k:]
    assert hop_progress("received", prev, nxt) == received
    assert hop_progress("processing", prev, nxt) == processing
    assert hop_progress("completed", prev, nxt) == completed


def test_p_stat_8_retrying_leaves_progress_unchanged() -> None:
    assert hop_progress("retrying", ["a"], ["b"]) is None


def test_p_stat_8_rounds_half_up_exactly() -> None:
    # k = 1, N = 8: received = 0.1 / 8 * 100 = 1.25 exactly -> 1.3 (half up, not banker's rounding)
    assert hop_progress("received", [], ["b"] * 7) == 1.3
    # k = 1, N = 16: processing = 0.5 / 16 * 100 = 3.125 -> 3.1
    assert hop_progress("processing", [], ["b"] * 15) == 3.1


def test_p_stat_8_single_actor_route_and_cap() -> None:
    assert hop_progress("received", [], []) == 10.0
    assert hop_progress("completed", [], []) == 100.0
    # a route extended at run time can never push progress over 100
    assert hop_progress("completed", ["a", "b"], []) == 100.0


def test_unknown_step_is_rejected_with_its_name() -> None:
    with pytest.raises(ValueError, match="'done'"):
        hop_progress("done", [], [])


def _reference(step: str, k: int, total: int) -> float:
    """P-STAT-8 literally, in exact fractions."""
    into = {"received": Fraction(1, 10), "processing": Fraction(1, 2), "completed": Fraction(1)}[step]
    percent = min((k - 1 + into) / total * 100, Fraction(100))
    return math.floor(percent * 10 + Fraction(1, 2)) / 10


@pytest.mark.parametrize("step", ["received", "processing", "completed"])
def test_p_stat_8_integer_arithmetic_matches_exact_fractions(step: str) -> None:
    for total in range(1, 41):
        for k in range(1, total + 3):  # k > total: a route extended at run time, capped at 100
            prev, nxt = ["a"] * (k - 1), ["b"] * max(total - k, 0)
            assert hop_progress(step, prev, nxt) == _reference(step, k, k + len(nxt)), (step, k, total)
