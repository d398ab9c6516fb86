"""The batch-level rules the actor runtime and the crew share (``asya.batch``): the start rule (P-TIME-6) and the
return time of failed records (P-ACK-4)."""

from __future__ import annotations

from typing import Any

import pytest

from asya.batch import StartRule, UnstartedRecordError, failed_visibilities
from asya.timeout import SAFETY_MARGIN_SECONDS

pytestmark = pytest.mark.unit


class _Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def _admit(rule: StartRule, n: int, budget: float = 0.0) -> None:
    rule.admit(message_id=f"m{n}", receipt_handle=f"h{n}", budget_seconds=budget)


def test_p_time_6_first_record_starts_even_without_time() -> None:
    rule = StartRule(_Context(remaining_ms=0))
    _admit(rule, 0, budget=60)
    assert rule.started == 1
    assert rule.unstarted == []


def test_p_time_6_a_record_whose_budget_does_not_fit_and_every_later_one_stay_unstarted() -> None:
    context = _Context(remaining_ms=int((SAFETY_MARGIN_SECONDS + 10) * 1000))
    rule = StartRule(context)
    _admit(rule, 0, budget=10)
    _admit(rule, 1, budget=10)  # exactly fits: remaining - margin == budget
    with pytest.raises(UnstartedRecordError, match="record m2 not started"):
        _admit(rule, 2, budget=11)
    context.remaining_ms = 10**9  # time appearing again does not restart the batch: order is kept
    with pytest.raises(UnstartedRecordError):
        _admit(rule, 3, budget=0)
    assert rule.started == 2
    assert rule.unstarted == ["h2", "h3"]


def test_p_time_6_crew_budget_zero_needs_only_the_safety_margin() -> None:
    rule = StartRule(_Context(remaining_ms=int(SAFETY_MARGIN_SECONDS * 1000) - 1))
    _admit(rule, 0)
    with pytest.raises(UnstartedRecordError):
        _admit(rule, 1)


def test_p_time_6_a_negative_budget_counts_as_zero_and_no_context_always_fits() -> None:
    rule = StartRule(_Context(remaining_ms=int(SAFETY_MARGIN_SECONDS * 1000)))
    _admit(rule, 0)
    _admit(rule, 1, budget=-30)  # a deadline already past: the SLA check handles it after the start
    free = StartRule(object())
    for n in range(3):
        _admit(free, n, budget=10**6)
    assert (rule.started, free.started) == (2, 3)


def test_start_unchecked_counts_the_record_as_started() -> None:
    rule = StartRule(_Context(remaining_ms=0))
    rule.start_unchecked()
    with pytest.raises(UnstartedRecordError):
        _admit(rule, 1)


def _record(n: int, receives: int | None) -> dict[str, Any]:
    attributes = {} if receives is None else {"ApproximateReceiveCount": str(receives)}
    return {"messageId": f"m{n}", "receiptHandle": f"h{n}", "attributes": attributes}


def test_p_ack_4_failed_records_come_back_after_a_growing_delay_capped_by_the_visibility_timeout() -> None:
    records = [_record(0, 1), _record(1, 2), _record(2, 3), _record(3, 9), _record(4, None), _record(5, 1)]
    entries = failed_visibilities(
        records, failed={"m0", "m1", "m2", "m3", "m4"}, unstarted=set(), visibility_timeout=lambda: 180
    )
    assert entries == [("h0", 5), ("h1", 10), ("h2", 20), ("h3", 180), ("h4", 5)], "m5 succeeded: untouched"


def test_p_time_6_unstarted_records_come_back_at_once_without_asking_the_queue() -> None:
    def no_lookup() -> int:
        raise AssertionError("the visibility timeout is only needed for started records")

    entries = failed_visibilities(
        [_record(0, 7), _record(1, 1)], failed={"m0"}, unstarted={"h0"}, visibility_timeout=no_lookup
    )
    assert entries == [("h0", 0)]
