"""FLY flush items say a shared origin once (GW-DATA-8) and read back as the same events (GW-SSE-11, P-STAT-17)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asya.store import FlyValue, TaskStore
from asya.store import records as rec

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 120_000, tzinfo=UTC)
ENVELOPE = "0b9f6c1e-8a57-4d3b-9b1f-6f0e2a7c5d41"


@pytest.fixture
def store(mesh: Any) -> TaskStore:
    return TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=lambda: START)


def _fly_items(mesh: Any, task_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = mesh.aws.dynamodb.query(
        TableName=mesh.resources.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :ev)",
        FilterExpression="#type = :fly",
        ExpressionAttributeNames={"#type": "type"},
        ExpressionAttributeValues={
            ":pk": rec.str_av(rec.task_pk(task_id)),
            ":ev": rec.str_av(rec.EVENT_PREFIX),
            ":fly": rec.str_av("fly"),
        },
        ConsistentRead=True,
    )["Items"]
    return items


def _fly(store: TaskStore, task_id: str) -> list[dict[str, Any]]:
    """The fly events a follower reads after the task's creation (number 1)."""
    snap = store.snapshot(task_id, 1)
    assert snap is not None
    return snap.fly


def _size(item: dict[str, Any]) -> int:
    return sum(len(name) + len(next(iter(value.values())).encode("utf-8")) for name, value in item.items())


def test_gw_data_8_one_origin_flush_states_it_once_and_stays_under_1_kb(store: TaskStore, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="summarize")
    words = ["A", "positive", "text", "of", "12", "words", "starting", "with", "'the", "quick", "brown'."]
    assert store.append_fly(
        "t1", [FlyValue(w if i == 0 else f" {w}", "summarize", ENVELOPE) for i, w in enumerate(words)]
    )
    (item,) = _fly_items(mesh, "t1")
    assert rec.get_str(item, "envelope_id") == ENVELOPE and rec.get_str(item, "actor") == "summarize"
    assert ENVELOPE not in (rec.get_str(item, "values") or "")
    assert _size(item) < 1024
    events = _fly(store, "t1")
    assert [e["seq"] for e in events] == list(range(2, 2 + len(words)))
    assert events[1]["data"] == {"payload": " positive", "actor": "summarize", "envelope_id": ENVELOPE}


def test_p_stat_17_mixed_origins_keep_their_own_actor_and_envelope(store: TaskStore, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="summarize")
    assert store.append_fly("t1", [FlyValue("a", "summarize", ENVELOPE), FlyValue({"b": None}, None, "t1")])
    (item,) = _fly_items(mesh, "t1")
    assert "envelope_id" not in item and "actor" not in item
    assert [e["data"] for e in _fly(store, "t1")] == [
        {"payload": "a", "actor": "summarize", "envelope_id": ENVELOPE},
        {"payload": {"b": None}, "actor": None, "envelope_id": "t1"},
    ]


def test_gw_evt_4_external_producer_without_actor_reads_back_none(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="summarize")
    assert store.append_fly("t1", [FlyValue("x", None, ENVELOPE), FlyValue("y", None, ENVELOPE)])
    assert [e["data"] for e in _fly(store, "t1")] == [
        {"payload": "x", "actor": None, "envelope_id": ENVELOPE},
        {"payload": "y", "actor": None, "envelope_id": ENVELOPE},
    ]


def test_gw_sse_6_the_task_item_names_the_newest_flush_so_followers_hold_back_only_its_numbers(
    store: TaskStore,
) -> None:
    """A flush takes its numbers and names them on the task item (``fly_from``..``fly_to``) in the same write; a
    follower holds back only those (GW-SSE-6): numbers of status changes and of older flushes are never waited on."""
    store.create_task(task_id="t-range", actor="normalize")
    value = FlyValue(payload="a", actor="summarize", envelope_id="t-range")
    assert store.append_fly("t-range", [value, value])  # numbers 2, 3
    store.report_running(
        "t-range", step="processing", actor="summarize", route_prev=[], route_curr="summarize", route_next=[]
    )  # 4
    assert store.append_fly("t-range", [value])  # number 5
    snap = store.snapshot("t-range", 0)
    assert snap is not None
    assert (snap.last_seq, snap.status_seq, snap.fly_range) == (5, 4, (5, 5))
    assert [n for n in range(1, 6) if snap.may_be_fly(n)] == [5]
    assert [event["seq"] for event in snap.fly] == [2, 3, 5]
