"""The run history's price, metered on real tasks of the example flow with ``history: steps`` (R3, P-HIST-2; GATEWAY
GW-DATA-8): the history rides on writes that already happen, so an intermediate hop still makes exactly one DynamoDB
write request (the hop claim; the task item grows by the chain head, at most one write unit more per task), and each
actor invocation makes at most one S3 PUT for it: 0.1 PUT per hop at full
batches of 10. The history-off figures are tests/functional/test_budget.py's (unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.traffic import measure

pytestmark = pytest.mark.functional

ACTORS = ("normalize", "analyze", "summarize")


@pytest.fixture(scope="module")
def usage() -> dict[str, Any]:
    return measure(batch_size=10, progress="hops", tasks=10, history="steps")


def test_p_hist_2_one_history_put_per_invocation_at_most(usage: dict[str, Any]) -> None:
    for actor in ACTORS:
        assert usage["s3_puts_per_invocation"][actor] == 1.0, usage["s3_puts_per_invocation"]
        assert usage["s3_puts_per_hop"][actor] <= 0.1 * usage["invocations"][actor], usage["s3_puts_per_hop"]


def test_p_hist_4_the_history_adds_no_dynamodb_write_gw_data_8(usage: dict[str, Any]) -> None:
    for actor in ACTORS:
        assert usage["dynamodb_write_requests_per_hop"][actor] == 1.0, (actor, usage["dynamodb_write_requests_per_hop"])
    dynamodb = usage["services"]["dynamodb"]["per_task"]
    # the chain head (about 140 bytes) makes the task item bigger: its writes may cross one more 1 KB unit, at most
    # one write unit per task over test_budget.py's 6 (priced in bench/REPORT.md), never a request more
    assert dynamodb["wru_table"] + dynamodb["wru_index"] <= 7, dynamodb
