"""The cancel-read benchmark counts what the real layer reads (``bench/cancelreads.py``, docs/protocol.md P-CANCEL-3
and P-CANCEL-5 (R3)): a generator hop on a fake clock, AWS answered in memory, no sleep."""

from __future__ import annotations

import pytest

from bench import cancelreads

pytestmark = pytest.mark.functional


@pytest.mark.parametrize(("seconds", "reads"), [(1, 0), (5, 1), (60, 12)])
def test_p_cancel_5_a_generator_hop_reads_its_task_at_most_once_per_5_s(seconds: float, reads: int) -> None:
    """P-CANCEL-5: a hop of ``D`` seconds makes at most ``floor(D / 5)`` reads, counted from the pre-flight."""
    assert cancelreads.measure(seconds) == reads
