"""The concurrent-records benchmark runs the real layer (``bench/records.py``, docs/protocol.md P-PROC-1): with
handlers that take no time (as the per-task request vectors are metered), records run at once make the same AWS calls
each as records run one at a time, so the vectors hold for both settings."""

from __future__ import annotations

import pytest

from bench import records

pytestmark = pytest.mark.functional


def test_p_proc_1_records_at_once_make_the_calls_of_records_one_at_a_time() -> None:
    one, all_at_once = (records.measure(n, batches=1, wait_seconds=0) for n in records.CONCURRENCY)
    assert all_at_once["record_concurrency"] == 10
    assert one["calls_per_record"] == all_at_once["calls_per_record"]
    assert one["calls_per_record"]  # the hop made its claim and sends: there was something to compare
