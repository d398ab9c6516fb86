"""Listing over keys-and-filters-only indexes (GW-LIST-2..4, GW-DATA-5, GW-DATA-8) against moto.

R2: the ``by_created``, ``by_outcome`` and ``long_deadlines`` indexes carry only their keys: a status update changes
no index key, so it never rewrites them, and a page's summaries, statuses and flows are read from the task items with
one ``BatchGetItem``.
Throttling is injected with a botocore ``after-call`` hook that moves keys of moto's real answer to
``UnprocessedKeys``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya import tableschema
from asya.store import IncompleteReadError, TaskStore
from asya.store import records as rec
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 120_000, tzinfo=UTC)


class Calls:
    """Counts a client's DynamoDB operations and can make ``BatchGetItem`` leave keys unprocessed."""

    def __init__(self, client: Any) -> None:
        self.names: list[str] = []
        self.throttle: list[int] = []  # per BatchGetItem call, how many answered items to hand back unprocessed
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.names.append(model.name)
        if model.name != "BatchGetItem" or not self.throttle:
            return
        held = self.throttle.pop(0)
        for table, items in parsed.get("Responses", {}).items():
            kept, unprocessed = items[held:], items[:held]
            parsed["Responses"][table] = kept
            if unprocessed:
                keys = [{"pk": item["pk"], "sk": item["sk"]} for item in unprocessed]
                parsed.setdefault("UnprocessedKeys", {})[table] = {"Keys": keys, "ConsistentRead": False}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def calls(mesh: Any) -> Iterator[Calls]:
    counter = Calls(mesh.aws.dynamodb)
    yield counter
    mesh.aws.dynamodb.meta.events.unregister("after-call.dynamodb", counter._after)


@pytest.fixture
def store(mesh: Any, clock: ManualClock) -> TaskStore:
    """A store listing today and the day before: every task here is made on one day, and a walk that runs out still
    walks past an empty day (the default 30-day window would query 8 shards of 29 more empty days per walk)."""
    return TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=clock, list_window_days=1)


def _index_entries(mesh: Any, index: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, IndexName=index)["Items"]
    return items


def _running(store: TaskStore, task_id: str, actor: str, step: str) -> bool:
    return store.report_running(
        task_id, step=step, actor=actor, route_prev=[], route_curr=actor, route_next=["x"], created_at=None
    )


def test_gw_data_8_indexes_hold_keys_only_and_change_at_most_once(store: TaskStore, mesh: Any) -> None:
    """A task with a long deadline is in ``by_created`` and ``long_deadlines`` from its creation; a running update
    changes neither; its failed terminal write leaves ``long_deadlines`` and enters the sparse ``by_outcome``."""
    by_name = {gsi.name: gsi for gsi in tableschema.GSIS}

    def entries() -> dict[str, list[dict[str, Any]]]:
        return {name: _index_entries(mesh, name) for name in by_name}

    store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", deadline_at="2026-03-01T11:00:00Z")
    created = entries()
    assert [len(created[name]) for name in ("by_created", "by_outcome", "long_deadlines")] == [1, 0, 1]
    assert _running(store, "t1", "normalize", "processing")
    assert entries() == created
    assert store.report_final("t1", status="failed", error="boom")
    ended = entries()
    assert ended["by_created"] == created["by_created"] and ended["long_deadlines"] == []
    for name in ("by_created", "by_outcome"):
        gsi = by_name[name]
        (entry,) = ended[name]
        assert set(entry) == {"pk", "sk", gsi.partition_key, gsi.sort_key}
    outcome = ended["by_outcome"][0]
    assert rec.get_str(outcome, "gsi2pk") == "OUTCOME#failed#2026-03-01#2"
    assert rec.get_str(outcome, "gsi1sk") == "2026-03-01T10:00:00.120Z#t1"
    assert [m["id"] for m in store.list_tasks(status="failed")["messages"]] == ["t1"]


def test_gw_list_2_summaries_come_from_the_task_items_in_one_batch_get(
    store: TaskStore, mesh: Any, clock: ManualClock, calls: Calls
) -> None:
    for i in range(3):
        store.create_task(task_id=f"t{i}", actor="normalize", flow="text-pipeline")
        clock.now += timedelta(minutes=1)
    assert _running(store, "t1", "normalize", "processing")
    calls.names.clear()
    page = store.list_tasks(limit=3)
    assert calls.names.count("BatchGetItem") == 1
    assert [m["id"] for m in page["messages"]] == ["t2", "t1", "t0"]
    running = page["messages"][1]
    assert running["status"] == "running" and running["current_actor"] == "normalize"
    assert running["updated_at"] == "2026-03-01T10:03:00.120Z"
    assert [m["status"] for m in page["messages"]] == ["pending", "running", "pending"]


def test_gw_list_4_entries_whose_task_changed_status_are_dropped(
    store: TaskStore, mesh: Any, clock: ManualClock
) -> None:
    for i in range(4):
        store.create_task(task_id=f"t{i}", actor="normalize")
        clock.now += timedelta(minutes=1)
    # the index lags the table: the task item already has another status, its index entry does not yet
    mesh.aws.dynamodb.update_item(
        TableName=mesh.resources.table,
        Key=rec.key("t2", rec.TASK_SK),
        UpdateExpression="SET #status = :s",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":s": rec.str_av("running")},
    )
    page = store.list_tasks(status="pending", limit=2, count=True)
    assert [m["id"] for m in page["messages"]] == ["t3", "t1"]  # the walk reads on past t2 (GW-LIST-3 (R3))
    assert page["total"] == 3  # with a filter, the count is of the matching tasks behind the entries (GW-LIST-3)
    rest = store.list_tasks(status="pending", limit=2, cursor=page["next_cursor"])
    assert [m["id"] for m in rest["messages"]] == ["t0"] and rest["next_cursor"] is None
    assert [m["id"] for m in store.list_tasks(limit=4)["messages"]] == ["t3", "t2", "t1", "t0"]


def test_gw_data_5_expired_tasks_are_never_listed(mesh: Any, clock: ManualClock) -> None:
    """On the default 30-day window: a task's expiry is 30 days after its terminal status."""
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=clock)
    store.create_task(task_id="old", actor="normalize")
    assert store.report_final("old", status="succeeded", result=1)
    clock.now += timedelta(minutes=1)
    store.create_task(task_id="new", actor="normalize")
    clock.now += rec.TERMINAL_TTL
    assert [m["id"] for m in store.list_tasks()["messages"]] == ["new"]  # dropped after the task-item read
    # a status filter checks the task items behind the entries, so its count is exact
    succeeded = store.list_tasks(status="succeeded", count=True)
    assert succeeded["messages"] == [] and succeeded["total"] == 0
    # the unfiltered count reads the keys-only index only (GW-DATA-8): it includes the expired task until DynamoDB
    # deletes it. Only the oldest day of a 30-day window can hold one.
    assert store.list_tasks(count=True)["total"] == 2


def test_gw_data_8_unprocessed_keys_are_retried(store: TaskStore, clock: ManualClock, calls: Calls) -> None:
    for i in range(3):
        store.create_task(task_id=f"t{i}", actor="normalize")
        clock.now += timedelta(minutes=1)
    calls.names.clear()
    calls.throttle = [2]
    page = store.list_tasks()
    assert [m["id"] for m in page["messages"]] == ["t2", "t1", "t0"]
    assert calls.names.count("BatchGetItem") == 2


def test_gw_data_8_keys_left_unprocessed_fail_the_listing(store: TaskStore, calls: Calls) -> None:
    store.create_task(task_id="t0", actor="normalize")
    calls.throttle = [1] * 5
    with pytest.raises(IncompleteReadError, match="1 keys"):
        store.list_tasks()
