"""The write budget of revision 3, metered on every AWS call of real tasks (GATEWAY GW-DATA-8, PROTOCOL P-ACK-8,
P-STAT-19; spec CHANGES.md "Budget").

The bench's own meter (``bench.traffic.measure``) runs tasks of the example flow (3 actors + x-sink, progress
``hops``, batch size 10) through a local mesh and bills every DynamoDB write from the items before and after it. The
budget fails here, in ``make test``, long before a benchmark report would show it: at most 6 write units per task,
table and indexes together (GW-DATA-8 (R3): the small input and result stay on the task item, so no body or result
item is written; the tasks are created without an ``Idempotency-Key``), and exactly one write request (the hop claim)
per intermediate hop.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.traffic import measure

pytestmark = pytest.mark.functional

TASKS = 10


@pytest.fixture(scope="module")
def usage() -> dict[str, Any]:
    return measure(batch_size=10, progress="hops", tasks=TASKS)


def test_gw_data_8_r3_a_task_costs_at_most_6_write_units_table_and_indexes(usage: dict[str, Any]) -> None:
    dynamodb = usage["services"]["dynamodb"]["per_task"]
    assert dynamodb["wru_table"] + dynamodb["wru_index"] <= 6, dynamodb
    assert dynamodb["wru_index"] <= 1, "only the creation writes an index entry on the success path"


def test_p_ack_8_an_intermediate_hop_makes_exactly_one_write_request(usage: dict[str, Any]) -> None:
    writes = usage["dynamodb_write_requests_per_hop"]
    for actor in ("normalize", "analyze", "summarize"):
        assert writes[actor] == 1.0, (actor, writes)


def test_gw_data_8_pre_flight_reads_once_per_batch(usage: dict[str, Any]) -> None:
    """One pre-flight ``BatchGetItem`` per batch. The only other read allowed is the cancel check of a generator
    handler (P-CANCEL-3/5 (R3): a ``GetItem`` once a batch has run 5 s, priced outside this budget), which a batch
    meets only on a machine slow enough to take that long."""
    for actor in ("normalize", "analyze", "summarize"):
        reads = dict(usage["dynamodb_reads_per_invocation"][actor])
        assert reads.pop("BatchGetItem") == 1.0, (actor, reads)
        assert set(reads) <= {"GetItem"}, (actor, reads)
