"""The shard of a task in the ``by_created`` and ``by_outcome`` indexes (GATEWAY GW-DATA-2, R2: ``TASKS#{day}#{shard
0..7}``): a pure function of the id, the same in every process and on every deployment, since a task's entry is
written once at creation and its ``by_outcome`` key later by another process."""

from __future__ import annotations

from collections import Counter

import pytest

from asya.store import records as rec

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("task_id", "shard"),
    [("t1", 2), ("task-0", 0), ("3f2b8c1e-9a4d-4e7f-b6a2-1c5d8e9f0a7b", 1), ("é", 2)],
)
def test_gw_data_2_the_shard_of_an_id_is_fixed(task_id: str, shard: int) -> None:
    """Literals: the first byte of the id's SHA-256 mod 8, not Python's per-process salted ``hash``; a change of the
    function would move every task of a live table to another partition, out of reach of the listing."""
    assert rec.index_shard(task_id) == shard


def test_gw_data_2_index_keys_carry_day_and_shard() -> None:
    assert rec.INDEX_SHARDS == 8
    assert rec.created_index_pk("2026-03-01", 5) == "TASKS#2026-03-01#5"
    assert rec.outcome_index_pk("failed", "2026-03-01", 0) == "OUTCOME#failed#2026-03-01#0"


def test_gw_data_2_ids_spread_over_every_shard() -> None:
    shards = Counter(rec.index_shard(f"task-{i}") for i in range(64))
    assert sorted(shards) == list(range(rec.INDEX_SHARDS))
    assert max(shards.values()) <= 16  # 8 expected each; none takes a day's writes alone


def test_gw_data_2_a_new_task_item_is_in_its_shard_of_its_creation_day() -> None:
    item = rec.new_task_item(
        "t1", actor="a", flow=None, deadline_at=None, context_id=None, now_ms="2026-02-28T23:59:59.999Z"
    )
    assert (item["gsi1pk"], item["gsi1sk"]) == ({"S": "TASKS#2026-02-28#2"}, {"S": "2026-02-28T23:59:59.999Z#t1"})
