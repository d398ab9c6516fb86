"""The DynamoDB task store against moto: creation, status rules, fly items, listing, cancel, pre-flight, backstop.

Spec: PROTOCOL section 10 (P-STAT-*), GATEWAY sections 4-7 and 13-14 (GW-TASK-*, GW-LIST-*, GW-CANCEL-1,
GW-SSE-3/11, GW-DATA-*, GW-BACK-*). Revision 2: no status event items; the task item is the state and its
``last_seq`` numbers every change, so a status write is asserted on the task item it leaves (``get_task``, or
``snapshot`` as a follower reads it), and only FLY values are event items.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya.store import FlyValue, ListQueryError, Snapshot, StatusUpdate, TaskExistsError, TaskStore
from asya.store import records as rec
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 120_000, tzinfo=UTC)
ROUTE = ["normalize", "analyze", "summarize"]
#: An input too large for the task item: it goes to the body item (GW-DATA-8 R3).
BIG = {"text": "x" * 600}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(mesh: Any, clock: ManualClock) -> TaskStore:
    store: TaskStore = mesh.store(clock)
    return store


def _hop(store: TaskStore, task_id: str, k: int, step: str, *, detailed: bool = False, **extra: Any) -> bool:
    return store.report_running(
        task_id,
        step=step,
        actor=ROUTE[k - 1],
        route_prev=ROUTE[: k - 1],
        route_curr=ROUTE[k - 1],
        route_next=ROUTE[k:],
        extra=extra or None,
        created_at="2026-03-01T10:00:00Z",
        detailed=detailed,
    )


def _snapshot(store: TaskStore, task_id: str, after: int = 0) -> Snapshot:
    snap = store.snapshot(task_id, after)
    assert snap is not None
    return snap


def _view(store: TaskStore, task_id: str) -> dict[str, Any]:
    view = store.get_task(task_id)
    assert view is not None
    return view


def _due(store: TaskStore) -> list[dict[str, str]]:
    return [entry for page in store.long_deadline_pages() for entry in page]


def _task_item(mesh: Any, task_id: str, sk: str = "TASK") -> dict[str, Any]:
    item: dict[str, Any] = mesh.aws.dynamodb.get_item(
        TableName=mesh.resources.table, Key=rec.key(task_id, sk), ConsistentRead=True
    )["Item"]
    return item


def test_gw_create_7_create_and_view(store: TaskStore, mesh: Any) -> None:
    created = store.create_task(
        task_id="t1",
        actor="normalize",
        flow="text-pipeline",
        payload={"text": "hi"},
        deadline_at="2026-03-01T10:05:00Z",
    )
    assert created["status"] == "pending"
    view = store.get_task("t1")
    assert view is not None
    assert view["id"] == "t1"
    assert view["status"] == "pending"
    assert view["created_at"] == "2026-03-01T10:00:00.120Z"
    assert view["flow"] == "text-pipeline"
    assert view["actor"] == "normalize"
    assert view["payload"] == {"text": "hi"}
    assert view["last_event_id"] == 1
    assert view["deadline_at"] == "2026-03-01T10:05:00Z"
    assert view["current_actor"] is None and view["step"] is None and view["progress_percent"] == 0
    assert view["data"]["status"] == "pending" and view["data"]["message"] == "Task created"
    # a follower reads event 1 from the task item itself: number 1, no fly item
    snap = _snapshot(store, "t1")
    assert (snap.status, snap.last_seq, snap.fly, snap.data["message"]) == ("pending", 1, [], "Task created")
    # GW-DATA-8 (R3): a payload that fits lives on the task item, with no body item
    item = _task_item(mesh, "t1")
    assert json.loads(item["payload"]["S"]) == {"text": "hi"}
    assert "Item" not in mesh.aws.dynamodb.get_item(TableName=mesh.resources.table, Key=rec.key("t1", "BODY"))
    # GW-DATA-2: by_created keys at creation; a 5-minute deadline is an SQS timer, not a long_deadlines entry
    assert (item["gsi1pk"]["S"], item["gsi1sk"]["S"]) == ("TASKS#2026-03-01#2", "2026-03-01T10:00:00.120Z#t1")
    assert "gsi3pk" not in item and "gsi3sk" not in item and "gsi2pk" not in item
    store.create_task(task_id="t2", actor="normalize", deadline_at="2026-03-01T11:00:00Z")
    long_item = _task_item(mesh, "t2")
    assert long_item["gsi3sk"]["S"] == "2026-03-01T11:00:00Z" and long_item["gsi3pk"]["S"].startswith("LONGDL#")


def test_create_refuses_an_existing_id(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    with pytest.raises(TaskExistsError, match="t1"):
        store.create_task(task_id="t1", actor="normalize")


def _items(mesh: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    return items


def test_gw_create_7_the_task_item_is_event_1_no_transaction_no_event_item(store: TaskStore, mesh: Any) -> None:
    """GW-CREATE-7 + GW-DATA-8 (R2): the record and event 1 are one conditional put of the task item (a transaction
    would bill each item twice), plus the body item only for a payload too large for the task item (R3); a status
    change writes the task item only, numbered by ``last_seq``, and no event item."""
    store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload=BIG)
    store.create_task(task_id="t2", actor="normalize", payload=None)
    assert sorted((item["pk"]["S"], item["sk"]["S"]) for item in _items(mesh)) == [
        ("TASK#t1", "BODY"),
        ("TASK#t1", "TASK"),
        ("TASK#t2", "TASK"),
    ]
    snap = _snapshot(store, "t1")
    assert (snap.status, snap.last_seq, snap.fly) == ("pending", 1, [])
    assert snap.data == {
        "id": "t1",
        "status": "pending",
        "progress_percent": 0.0,
        "current_actor": None,
        "step": None,
        "message": "Task created",
        "timestamp": "2026-03-01T10:00:00.120Z",
    }
    assert _hop(store, "t1", 1, "processing")
    # numbering continues from event 1 on the same item; still no event item
    snap = _snapshot(store, "t1", 1)
    assert (snap.status, snap.last_seq, snap.fly) == ("running", 2, [])
    assert (snap.data["message"], snap.data["step"], snap.data["current_actor"]) == (
        "Processing in normalize",
        "processing",
        "normalize",
    )
    assert not [item for item in _items(mesh) if item["sk"]["S"].startswith("EV#")]


def test_gw_data_5_fly_values_expire_24_hours_after_their_flush_the_task_item_does_not(
    store: TaskStore, clock: ManualClock
) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert store.append_fly("t1", [FlyValue("early", "normalize", "t1")])
    clock.advance(hours=23, minutes=59)
    assert [e["seq"] for e in _snapshot(store, "t1").fly] == [2]
    clock.advance(minutes=1)
    snap = _snapshot(store, "t1")
    assert snap.fly == []
    assert (snap.status, snap.last_seq) == ("pending", 2)  # the task item lives on (30 days after a terminal status)


def test_a_stored_status_event_item_of_an_earlier_release_is_no_fly_event(store: TaskStore, mesh: Any) -> None:
    """Revision 1 stored status events as ``EV#`` items; a follower sends only fly items, and the state from the
    task item."""
    store.create_task(task_id="t1", actor="normalize")
    legacy = {
        **rec.key("t1", rec.event_sk(1)),
        "first_seq": rec.num_av(1),
        "type": rec.str_av("status"),
        "status": rec.str_av("pending"),
        "data": rec.json_av({"id": "t1", "status": "pending", "message": "stored"}),
    }
    mesh.aws.dynamodb.put_item(TableName=mesh.resources.table, Item=legacy)
    snap = _snapshot(store, "t1")
    assert snap.fly == []
    assert (snap.last_seq, snap.data["message"]) == (1, "Task created")


def test_a_failed_body_write_leaves_no_task_behind(store: TaskStore, mesh: Any) -> None:
    """The create fails as a whole: a task without its payload never becomes visible."""

    def throttle_body(params: dict[str, Any], **_: Any) -> None:
        if params.get("Item", {}).get("sk") == {"S": "BODY"}:
            error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
            raise ClientError(error, "PutItem")

    mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.PutItem", throttle_body)
    with pytest.raises(ClientError) as raised:
        store.create_task(task_id="t1", actor="normalize", payload=BIG)
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert store.get_task("t1") is None
    assert _items(mesh) == []


def _orphan_task(store: TaskStore, mesh: Any, task_id: str, deadline_at: str) -> None:
    """A task item with no body: its body write failed at creation and deleting the task failed too (or the gateway
    died between the two puts)."""
    store.create_task(task_id=task_id, actor="normalize", deadline_at=deadline_at, payload=BIG)
    mesh.aws.dynamodb.delete_item(TableName=mesh.resources.table, Key=rec.key(task_id, rec.BODY_SK))


def test_gw_back_2_a_task_left_without_its_body_still_times_out(
    store: TaskStore, mesh: Any, clock: ManualClock
) -> None:
    _orphan_task(store, mesh, "t1", "2026-03-01T10:20:00Z")  # a long deadline: in long_deadlines
    clock.advance(minutes=21)
    assert _due(store) == [{"id": "t1", "deadline_at": "2026-03-01T10:20:00Z"}]
    assert store.time_out_overdue("t1", "2026-03-01T10:20:00Z") is True
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["error"] == "task timed out" and view["payload"] is None
    assert _due(store) == []


def test_gw_cancel_1_and_p_sink_5_a_task_left_without_its_body_can_still_end(store: TaskStore, mesh: Any) -> None:
    _orphan_task(store, mesh, "t1", "2026-03-01T11:00:00Z")
    assert store.cancel("t1") == "canceled"
    _orphan_task(store, mesh, "t2", "2026-03-01T11:00:00Z")
    assert store.report_final("t2", status="succeeded", result={"n": 1}) is True
    view = store.get_task("t2")
    assert view is not None
    assert view["status"] == "succeeded" and view["result"] == {"n": 1}


def test_gw_data_2_a_result_item_lost_after_its_terminal_write_is_written_by_the_redelivery(
    store: TaskStore, mesh: Any
) -> None:
    """x-sink's terminal write lands (tagged ``terminal_by`` = its message id), its result put fails, the record is
    redelivered (a result too large for the task item, GW-DATA-8 R3): the redelivery is stale for the task, but it
    finds its own tag and writes the result item. A stale writer with another message id never changes the result
    (GW-DATA-2, GW-SSE-7: the terminal event's data)."""
    store.create_task(task_id="t1", actor="normalize")
    refused: list[str] = []

    def refuse_result(params: dict[str, Any], **_: Any) -> None:
        if params.get("Item", {}).get("sk") == {"S": "RESULT"} and not refused:
            refused.append("RESULT")
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "try again"}}, "PutItem")

    mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.PutItem", refuse_result)
    with pytest.raises(ClientError):
        store.report_final("t1", status="succeeded", result={"n": 1, **BIG}, writer_id="m-1")
    item = _task_item(mesh, "t1")
    assert refused and item["status"]["S"] == "succeeded"
    assert (item["terminal_by"]["S"], item["has_result"]["BOOL"]) == ("m-1", True)
    assert "Item" not in mesh.aws.dynamodb.get_item(TableName=mesh.resources.table, Key=rec.key("t1", "RESULT"))
    # another writer's late success is stale and writes no result item
    assert store.report_final("t1", status="succeeded", result={"n": 2, **BIG}, writer_id="m-2") is False
    assert "Item" not in mesh.aws.dynamodb.get_item(TableName=mesh.resources.table, Key=rec.key("t1", "RESULT"))
    # the redelivery of m-1 completes it
    assert store.report_final("t1", status="succeeded", result={"n": 1, **BIG}, writer_id="m-1") is False
    snap = _snapshot(store, "t1")
    assert (snap.status, snap.last_seq, snap.data["result"]) == ("succeeded", 2, {"n": 1, **BIG})
    assert _view(store, "t1")["result"] == {"n": 1, **BIG}
    # a third delivery of another message still changes nothing
    assert store.report_final("t1", status="succeeded", result={"n": 3, **BIG}, writer_id="m-3") is False
    assert _view(store, "t1")["result"] == {"n": 1, **BIG}


def test_unknown_task_view_is_none_and_writes_are_no_ops(store: TaskStore, mesh: Any) -> None:
    """P-STAT-4: writes for an id with no task record are no-ops."""
    assert store.get_task("nope") is None
    assert _hop(store, "nope", 1, "received") is False
    assert store.report_final("nope", status="succeeded", result=1) is False
    assert store.append_fly("nope", [FlyValue("x", "a", "nope")]) is False
    items = mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"]
    assert items == []


def test_p_stat_3_full_run_sequence_numbers_are_consecutive(store: TaskStore, clock: ManualClock) -> None:
    """Progress ``detailed``: every accepted write is one change of the task item, numbered consecutively."""
    store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload={"text": "hi"})

    def state() -> tuple[int, float, dict[str, Any]]:
        data = _view(store, "t1")["data"]
        return _view(store, "t1")["last_event_id"], data["progress_percent"], data

    states = [state()]
    for k in (1, 2, 3):
        clock.advance(milliseconds=10)
        assert _hop(store, "t1", k, "received", detailed=True, message_size_kb=0.1)
        states.append(state())
        assert _hop(store, "t1", k, "processing", detailed=True)
        states.append(state())
        assert _hop(store, "t1", k, "completed", detailed=True, duration_ms=12, frames=1)
        states.append(state())
    clock.advance(milliseconds=10)
    assert store.report_final("t1", status="succeeded", result={"summary": "ok"}, checkpoint_key="succeeded/k.json")
    assert [(seq, progress) for seq, progress, _ in states] == list(
        zip(range(1, 11), [0, 3.3, 16.7, 33.3, 36.7, 50.0, 66.7, 70.0, 83.3, 100.0], strict=True)
    )
    snap = _snapshot(store, "t1")
    assert snap.last_seq == 11 and snap.fly == []
    final = snap.data
    assert final["status"] == "succeeded" and final["progress_percent"] == 100.0
    assert final["result"] == {"summary": "ok"}
    assert final["checkpoint_key"] == "succeeded/k.json"
    assert final["message"] == "Completed"
    received = states[1][2]
    assert received["message"] == "Received by normalize (0.1 KB)"
    # progress `detailed` stores the route lists of received/processing/completed (P-STAT-19)
    assert received["prev"] == [] and received["next"] == ["analyze", "summarize"]
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "succeeded"
    assert view["result"] == {"summary": "ok"}
    assert view["last_event_id"] == 11
    assert view["current_actor"] == "summarize"
    assert view["checkpoint_uri"] == "s3://asya-demo-storage/succeeded/k.json"
    assert view["data"]["result"] == {"summary": "ok"}


def test_p_stat_9_late_received_after_completed_keeps_progress(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert _hop(store, "t1", 1, "completed")
    # out of order: the step changes, so it is logged, but progress never decreases
    assert _hop(store, "t1", 1, "received")
    view = store.get_task("t1")
    assert view is not None
    assert view["step"] == "received"
    assert view["progress_percent"] == 33.3
    assert view["last_event_id"] == 3 and view["data"]["progress_percent"] == 33.3


def test_p_stat_6_identical_running_event_is_stale_and_not_logged(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert _hop(store, "t1", 1, "processing")
    assert _hop(store, "t1", 1, "processing") is False
    assert _view(store, "t1")["last_event_id"] == 2  # the stale write changed nothing, not even the number


def test_p_stat_1_running_after_terminal_is_stale(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert store.report_final("t1", status="failed", error="boom", error_details={"message": "boom"}, failed_actor="a")
    assert _hop(store, "t1", 2, "received") is False
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed"
    assert view["error"] == "boom" and view["error_details"] == {"message": "boom"} and view["failed_actor"] == "a"
    assert store.get_task("t1")["last_event_id"] == 2  # type: ignore[index]


def test_p_stat_2_second_terminal_write_is_stale_but_attaches_checkpoint(store: TaskStore, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at="2026-03-01T11:00:00Z")  # long: indexed
    assert "gsi3pk" in _task_item(mesh, "t1")
    assert store.cancel("t1") == "canceled"
    # x-sink's success arrives later: stale, the result is never shown, but the checkpoint key is attached
    ok = store.report_final(
        "t1", status="succeeded", result={"late": True}, checkpoint_key="succeeded/2026-03-01/t1.json"
    )
    assert ok is False
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "canceled"
    assert "result" not in view
    assert view["checkpoint_key"] == "succeeded/2026-03-01/t1.json"
    assert view["last_event_id"] == 2
    # a second attach does not replace the first key
    store.report_final("t1", status="failed", error="x", checkpoint_key="failed/2026-03-01/t1.json")
    assert store.get_task("t1")["checkpoint_key"] == "succeeded/2026-03-01/t1.json"  # type: ignore[index]
    # terminal: deadline index entry removed, expiry set 30 days after the terminal status
    item = _task_item(mesh, "t1")
    assert "gsi3pk" not in item and "gsi3sk" not in item
    assert int(item["ttl"]["N"]) == int((START + timedelta(days=30)).timestamp())
    assert item["gsi2pk"]["S"] == "OUTCOME#canceled#2026-03-01#2"  # by_outcome, sparse, shard of t1 (GW-DATA-2)


def test_first_terminal_result_is_not_replaced_by_a_redelivery(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert store.report_final("t1", status="succeeded", result={"n": 1})
    assert store.report_final("t1", status="succeeded", result={"n": 2}) is False
    assert store.get_task("t1")["result"] == {"n": 1}  # type: ignore[index]


def test_gw_task_2_succeeded_task_shows_its_last_hop_completed(store: TaskStore) -> None:
    """With `hops` progress no `completed` event is written, yet the final view and event say step `completed`."""
    store.create_task(task_id="t1", actor="normalize")
    assert store.report_running(
        "t1", step="processing", actor="summarize", route_prev=["a", "b"], route_curr="summarize", route_next=[]
    )
    assert store.report_final("t1", status="succeeded", result={"n": 1})
    view = store.get_task("t1")
    assert view is not None
    assert (view["step"], view["current_actor"], view["progress_percent"]) == ("completed", "summarize", 100)
    assert view["data"]["step"] == "completed" and _snapshot(store, "t1").data["step"] == "completed"


@pytest.mark.parametrize("status", ["failed", "canceled"])
def test_status_update_with_wrong_created_day_hint_still_applies(store: TaskStore, mesh: Any, status: str) -> None:
    """The blind outcome write guesses the creation day for the by_outcome key; a wrong guess falls back to the exact
    update, which keys the task under its real creation day."""
    store.create_task(task_id="t1", actor="normalize")
    update = StatusUpdate(status=status, created_at_hint="2026-02-27T23:59:59Z")
    assert store.apply_status("t1", update)
    assert _task_item(mesh, "t1")["gsi2pk"]["S"] == f"OUTCOME#{status}#2026-03-01#2"
    assert [m["id"] for m in store.list_tasks(status=status)["messages"]] == ["t1"]


def test_pause_and_resume(store: TaskStore, mesh: Any, clock: ManualClock) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at="2026-03-01T11:00:00Z")
    assert "gsi3pk" in _task_item(mesh, "t1")
    meta = {"prompt": "Approve?", "fields": [{"name": "ok", "type": "boolean"}]}
    assert store.apply_status("t1", StatusUpdate(status="paused", pause_metadata=meta, remaining_seconds=299))
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "paused" and view["deadline_at"] is None
    assert view["pause_metadata"] == meta and view["remaining_seconds"] == 299
    # GW-DATA-2: pause metadata in its own PAUSE item, never on the task item; the long deadline left the index
    assert json.loads(_task_item(mesh, "t1", "PAUSE")["pause_metadata"]["S"]) == meta
    assert "pause_metadata" not in _task_item(mesh, "t1")
    assert "gsi3pk" not in _task_item(mesh, "t1")
    # a redelivered pause is stale
    assert store.apply_status("t1", StatusUpdate(status="paused", pause_metadata=meta)) is False
    # only the resume moves paused -> running, restoring the deadline entry
    assert _hop(store, "t1", 1, "processing") is False
    clock.advance(minutes=10)
    resume = StatusUpdate(status="running", resume=True, deadline_at="2026-03-01T10:40:00Z")
    assert store.apply_status("t1", resume)
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "running" and view["deadline_at"] == "2026-03-01T10:40:00Z"
    assert view["message"] == "Resumed" and "remaining_seconds" not in view
    assert _task_item(mesh, "t1")["gsi3sk"]["S"] == "2026-03-01T10:40:00Z"  # 30 minutes away: indexed again


def test_gw_sse_11_fly_values_are_expanded_with_consecutive_ids(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert _hop(store, "t1", 1, "processing")
    assert store.append_fly("t1", [FlyValue("A", "normalize", "t1"), FlyValue(" B", "normalize", "t1")])
    assert store.append_fly("t1", [FlyValue({"c": 3}, None, "t1")])
    assert _hop(store, "t1", 1, "completed")
    snap = _snapshot(store, "t1")
    # numbers 1, 2 and 6 are status changes (no item); 3..5 the fly values
    assert snap.last_seq == 6
    assert [(e["seq"], e["event"]) for e in snap.fly] == [(3, "fly"), (4, "fly"), (5, "fly")]
    assert snap.fly[0]["data"] == {"payload": "A", "actor": "normalize", "envelope_id": "t1"}
    assert snap.fly[2]["data"] == {"payload": {"c": 3}, "actor": None, "envelope_id": "t1"}
    # readers skip values <= P even inside one coalesced item
    assert [e["seq"] for e in _snapshot(store, "t1", 3).fly] == [4, 5]
    assert _snapshot(store, "t1", 5).fly == []


def test_p_stat_17_oversized_fly_value_is_truncated(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    big = "x" * (300 * 1024)
    assert store.append_fly("t1", [FlyValue(big, "a", "t1"), FlyValue("small", "a", "t1")])
    events = _snapshot(store, "t1", 1).fly
    assert [e["seq"] for e in events] == [2, 3]
    assert events[0]["data"]["payload"] == {"__truncated__": True, "size_bytes": len(big) + 2}
    assert events[1]["data"]["payload"] == "small"


def test_gw_data_5_expired_fly_items_are_ignored(store: TaskStore, clock: ManualClock) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert store.append_fly("t1", [FlyValue("old", "normalize", "t1")])
    clock.advance(hours=23)
    assert store.append_fly("t1", [FlyValue("new", "normalize", "t1")])
    clock.advance(hours=2)  # fly 2 is 25 h old, fly 3 is 2 h old
    assert [(e["seq"], e["data"]["payload"]) for e in _snapshot(store, "t1").fly] == [(3, "new")]


def test_gw_data_5_expired_task_is_gone(store: TaskStore, clock: ManualClock) -> None:
    store.create_task(task_id="t1", actor="normalize")
    store.report_final("t1", status="succeeded", result=None)
    clock.advance(days=31)
    assert store.get_task("t1") is None
    assert store.statuses(["t1"]) == {}
    assert store.snapshot("t1", 0) is None


def test_gw_data_6_large_values_go_to_s3(store: TaskStore, mesh: Any) -> None:
    """P-LARGE-7: task inputs and results too big for the task record are stored in S3 (``GATEWAY.md``, GW-DATA-6)."""
    big = {"text": "y" * (70 * 1024)}
    store.create_task(task_id="t1", actor="normalize", payload=big)
    assert store.report_final("t1", status="succeeded", result=big)
    body = _task_item(mesh, "t1", "BODY")
    assert body["payload_s3"]["S"] == "tasks/t1/payload.json" and "payload" not in body
    result = _task_item(mesh, "t1", "RESULT")  # R2: the result item, written after the terminal task write
    assert result["result_s3"]["S"] == "tasks/t1/result.json" and "result" not in result
    view = store.get_task("t1")
    assert view is not None
    assert view["payload"] == big and view["result"] == big
    # SSE status data does the same as the view: inline up to 4 MiB, read back from S3
    final = _snapshot(store, "t1").data
    assert final["result"] == big and "result_url" not in final


def test_gw_cancel_1(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert store.cancel("nope") == "not_found"
    assert store.cancel("t1") == "canceled"
    assert store.cancel("t1") == "terminal"
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "canceled"
    data = _snapshot(store, "t1", 1).data
    assert data["status"] == "canceled" and data["message"] == "Canceled by client"
    assert view["last_event_id"] == 2


def test_gw_cancel_2_deletes_the_paused_envelope(store: TaskStore, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="normalize")
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key="paused/t1.json", Body=b"{}")
    store.apply_status("t1", StatusUpdate(status="paused", pause_metadata={"prompt": "p", "fields": []}))
    assert store.cancel("t1") == "canceled"
    listing = mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="paused/")
    assert listing.get("KeyCount", 0) == 0


def test_p_stat_10_preflight_batch_read(store: TaskStore) -> None:
    ids = [f"t{i}" for i in range(150)]
    for task_id in ids[:120]:
        store.create_task(task_id=task_id, actor="normalize")
    store.cancel("t7")
    statuses = store.statuses([*ids, "t7"])
    assert len(statuses) == 120
    assert statuses["t7"] == "canceled" and statuses["t8"] == "pending"
    assert "t130" not in statuses


def test_p_stat_10_preflight_read_error_means_unknown(mesh: Any, clock: ManualClock) -> None:
    broken = TaskStore(table="asya-demo-missing", dynamodb=mesh.aws.dynamodb, clock=clock)
    assert broken.statuses(["t1"]) == {}
    assert broken.preflight([rec.key("t1", rec.TASK_SK)]) == {}


def test_gw_back_3_view_times_out_an_overdue_task(store: TaskStore, clock: ManualClock, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at="2026-03-01T10:20:00Z")
    _hop(store, "t1", 1, "processing")
    assert _due(store) == []
    clock.advance(minutes=21)
    assert _due(store) == [{"id": "t1", "deadline_at": "2026-03-01T10:20:00Z"}]
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["error"] == "task timed out" and view["message"] == "task timed out"
    assert _due(store) == []
    # a short deadline (an SQS timer, never in the index) is enforced on the read path all the same
    store.create_task(task_id="t2", actor="normalize", deadline_at="2026-03-01T10:25:00Z")
    clock.advance(minutes=5)
    assert _due(store) == []
    assert _view(store, "t2")["status"] == "failed"
    # GW-BACK-4: x-sink success after the backstop leaves it failed but attaches its checkpoint
    store.report_final("t1", status="succeeded", result=1, checkpoint_key="succeeded/2026-03-01/t1.json")
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["checkpoint_key"] == "succeeded/2026-03-01/t1.json"


def test_gw_back_2_deadline_changed_is_ignored(store: TaskStore, clock: ManualClock) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at="2026-03-01T10:01:00Z")
    clock.advance(minutes=2)
    assert store.time_out_overdue("t1", "2026-03-01T09:00:00Z") is False
    assert store.expire_if_overdue({"id": "t1", "status": "pending", "deadline_at": "2026-03-01T10:01:00Z"})
    assert store.get_task("t1", enforce_deadline=False)["status"] == "failed"  # type: ignore[index]


def test_gw_list_newest_first_filters_and_cursor(mesh: Any, clock: ManualClock) -> None:
    """Over a 3-day window: the three days of the tasks and an empty one before them (the default 30 days would query
    8 shards of 27 more empty days for each of the eleven listings)."""
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=clock, list_window_days=3)
    for i in range(5):
        store.create_task(task_id=f"a{i}", actor="normalize", flow="text-pipeline" if i % 2 == 0 else None)
        clock.advance(hours=10)  # spreads the tasks over three days
    store.report_final("a1", status="failed", error="boom")
    page1 = store.list_tasks(limit=2, count=True)
    assert [m["id"] for m in page1["messages"]] == ["a4", "a3"]
    assert page1["total"] == 5
    page2 = store.list_tasks(limit=2, cursor=page1["next_cursor"])
    assert [m["id"] for m in page2["messages"]] == ["a2", "a1"]
    assert page2["total"] is None
    assert page2["messages"][1]["error"] == "boom" and page2["messages"][1]["status"] == "failed"
    page3 = store.list_tasks(limit=2, cursor=page2["next_cursor"])
    assert [m["id"] for m in page3["messages"]] == ["a0"]
    assert page3["next_cursor"] is None
    assert [m["id"] for m in store.list_tasks(offset=1, limit=3)["messages"]] == ["a3", "a2", "a1"]
    assert [m["id"] for m in store.list_tasks(flow="text-pipeline")["messages"]] == ["a4", "a2", "a0"]
    by_status = store.list_tasks(status="pending", count=True)
    assert [m["id"] for m in by_status["messages"]] == ["a4", "a3", "a2", "a0"]
    assert by_status["total"] == 4
    assert [m["id"] for m in store.list_tasks(status="failed")["messages"]] == ["a1"]
    summary = page1["messages"][0]
    assert set(summary) == {
        "id",
        "status",
        "flow",
        "actor",
        "created_at",
        "updated_at",
        "progress_percent",
        "current_actor",
        "deadline_at",
    }


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"status": "done"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"offset": -1}, "offset"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": base64.urlsafe_b64encode(b'{"day":"x","key":{}}').decode(), "offset": 1}, "cursor"),
    ],
)
def test_gw_list_1_invalid_parameters_name_the_parameter(store: TaskStore, kwargs: dict[str, Any], param: str) -> None:
    with pytest.raises(ListQueryError, match=f"^{param}:"):
        store.list_tasks(**kwargs)


def test_delete_task_removes_every_item(store: TaskStore, mesh: Any) -> None:
    store.create_task(task_id="t1", actor="normalize", payload={"text": "y" * (70 * 1024)})
    _hop(store, "t1", 1, "processing")
    store.delete_task("t1")
    assert mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"] == []
    assert mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="tasks/").get("KeyCount", 0) == 0
    assert store.get_task("t1") is None


def test_p_stat_5_retrying_keeps_progress_and_is_logged(store: TaskStore) -> None:
    store.create_task(task_id="t1", actor="normalize")
    assert _hop(store, "t1", 2, "processing")
    assert _hop(store, "t1", 2, "retrying", attempt=2, delay_seconds=1, error="boom")
    view = store.get_task("t1")
    assert view is not None
    assert view["step"] == "retrying" and view["progress_percent"] == 50.0
    assert view["data"]["attempt"] == 2 and view["data"]["delay_seconds"] == 1
    assert view["message"] == "Retrying analyze (attempt 2)"
    assert "prev" not in view["data"]


@pytest.mark.parametrize(
    "update",
    [
        StatusUpdate(status="running"),
        StatusUpdate(status="running", step="processing"),
        StatusUpdate(status="running", actor="analyze"),
        StatusUpdate(status="running", progress=12.5),
    ],
)
def test_gw_evt_1_partial_running_events(store: TaskStore, update: StatusUpdate) -> None:
    """External running events may carry any subset of step, current actor and progress (GW-EVT-1/2)."""
    store.create_task(task_id="t1", actor="normalize")
    assert store.apply_status("t1", update)
    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "running" and view["last_event_id"] == 2
    # the same event again changes nothing
    assert store.apply_status("t1", update) is False
