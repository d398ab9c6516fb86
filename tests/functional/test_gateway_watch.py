"""One stream, many tasks: ``GET /api/v1/mesh/events?ids=...`` over real HTTP against moto (GW-SSE (R3),
docs/http.md GW-SSE-20..27).

The store is driven from the test thread while the stream is open; the gateway polls every 10 ms. Assertions are on
the frames and on the DynamoDB calls made, never on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.store import FlyValue
from asya_gateway import GatewayConfig, create_app
from tests.clocks import ManualClock
from tests.sse import frames as sse_frames

pytestmark = pytest.mark.functional

#: A flush takes a number, then writes its item: a poll between the two holds the number back for ``sse_gap_wait``.
#: 2 s covers the gap on a loaded box (0.05 s could count a late item's number as a status change and skip its value).
FAST = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=2.0)


class _Calls:
    """DynamoDB operations made by the gateway's store, with their ``ConsistentRead`` flag."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, bool | None]] = []

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        consistent: bool | None = params.get("ConsistentRead")
        if model.name == "BatchGetItem":
            consistent = next(iter(params["RequestItems"].values())).get("ConsistentRead")
        with self.lock:
            self.calls.append((model.name, consistent))

    def taken(self) -> list[tuple[str, bool | None]]:
        with self.lock:
            out, self.calls = self.calls, []
        return out


@pytest.fixture
def gw(mesh: Any, serve_asgi: Any) -> Iterator[tuple[httpx.Client, Any, _Calls]]:
    clock = ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))
    store = mesh.store(clock)
    calls = _Calls()
    app = create_app(FAST, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with httpx.Client(base_url=serve_asgi(app)) as client:
        # registered after the app exists: only the stream's reads are recorded, not the table's provisioning
        mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.*", calls)
        yield client, store, calls
        mesh.aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.*", calls)


def _create(client: httpx.Client, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        response = client.post("/api/v1/mesh/?actor=analyze", json={"payload": {"n": 1}})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def frames(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The stream's frames; ``id`` stays text (a cursor map)."""
    return sse_frames(response, numeric_ids=False)


def _events(stream: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (frame for frame in stream if "event" in frame)


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("ids=", "ids has an empty id: ''"),
        ("ids=a,,b", "ids has an empty id: 'a,,b'"),
        ("ids=a,a", "ids names 'a' twice"),
        ("ids=" + ",".join(f"t{i}" for i in range(101)), "ids names 101 tasks; at most 100 per stream"),
        ("ids=" + "x" * 3000, "ids has an id too long to name a task: '" + "x" * 40 + "'..."),
    ],
)
def test_ids_are_validated_with_clear_400s_gw_sse_20(gw: Any, query: str, error: str) -> None:
    client, _, _ = gw
    response = client.get(f"/api/v1/mesh/events?{query}")
    assert (response.status_code, response.json()) == (400, {"error": error})


@pytest.mark.parametrize(
    ("header", "error"),
    [
        ("a", "Last-Event-ID must be 'id:seq' pairs joined by ',', got 'a'"),
        ("a:-1", "Last-Event-ID must be 'id:seq' pairs joined by ',', got 'a:-1'"),
        (":3", "Last-Event-ID must be 'id:seq' pairs joined by ',', got ':3'"),
        ("zz:3", "Last-Event-ID names 'zz', which is not in ids"),
        ("a:1,a:2", "Last-Event-ID names 'a' twice"),
    ],
)
def test_cursor_map_is_validated_gw_sse_21(gw: Any, header: str, error: str) -> None:
    client, _, _ = gw
    response = client.get("/api/v1/mesh/events?ids=a,b", headers={"Last-Event-ID": header})
    assert (response.status_code, response.json()) == (400, {"error": error})


def test_unknown_ids_404_and_gone_gw_sse_22(gw: Any) -> None:
    client, store, _ = gw
    missing = client.get("/api/v1/mesh/events?ids=nope,nada")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    (task_id,) = _create(client, 1)
    store.report_final(task_id, status="succeeded", result={"ok": 1})
    with client.stream("GET", f"/api/v1/mesh/events?ids=nope,{task_id}") as response:
        got = list(_events(frames(response)))
    assert (got[0]["event"], got[0]["data"]) == ("gone", {"task_id": "nope"})
    assert [(f["event"], f["data"]["task_id"]) for f in got[1:]] == [("status", task_id), ("status", task_id)]
    assert got[-1]["data"]["result"] == {"ok": 1}


def test_events_carry_task_id_and_finished_ids_drop_out_gw_sse_23_24(gw: Any) -> None:
    client, store, calls = gw
    first, second = _create(client, 2)
    with client.stream("GET", f"/api/v1/mesh/events?ids={first},{second}") as response:
        stream = _events(frames(response))
        catchups = [next(stream), next(stream)]
        assert [(f["event"], f["data"]["task_id"], f["data"]["status"]) for f in catchups] == [
            ("status", first, "pending"),
            ("status", second, "pending"),
        ]
        assert "id" not in catchups[0] and catchups[0]["retry"] == 1000
        store.append_fly(first, [FlyValue(payload="A", actor="analyze", envelope_id=first)])  # seq 2
        fly = next(stream)
        assert (fly["event"], fly["id"], fly["data"]) == (
            "fly",
            f"{first}:2",
            {"payload": "A", "actor": "analyze", "envelope_id": first, "task_id": first},
        )
        store.report_final(first, status="succeeded", result={"r": 1})  # seq 3
        final = next(stream)
        assert (final["event"], final["id"], final["data"]["status"]) == ("status", f"{first}:3", "succeeded")
        assert final["data"]["result"] == {"r": 1} and final["data"]["task_id"] == first
        calls.taken()
        # the finished task is no longer read: wait for two polls of the other task alone
        polls: list[list[str]] = []
        while len(polls) < 2:
            store_calls = [name for name, _ in calls.taken()]
            if store_calls:
                polls.append(store_calls)
        store.report_final(second, status="failed", error="boom")
        last = next(stream)
        assert (last["id"], last["data"]["task_id"], last["data"]["error"]) == (f"{first}:3,{second}:2", second, "boom")
        assert list(stream) == []
    # GW-SSE-24: a poll of the unfinished task alone is one BatchGetItem of one key, and no query
    assert all(set(poll) <= {"BatchGetItem"} for poll in polls), polls


def test_one_eventually_consistent_batch_get_per_poll_gw_sse_25(gw: Any) -> None:
    client, store, calls = gw
    ids = _create(client, 5)
    with client.stream("GET", f"/api/v1/mesh/events?ids={','.join(ids)}") as response:
        stream = _events(frames(response))
        for _ in ids:
            assert next(stream)["data"]["status"] == "pending"
        calls.taken()
        store.report_running(
            ids[2], step="processing", actor="analyze", route_prev=[], route_curr="analyze", route_next=[]
        )
        changed = next(stream)
        assert (changed["data"]["task_id"], changed["data"]["status"]) == (ids[2], "running")
        recorded = calls.taken()
        for task_id in ids:
            store.cancel(task_id)
        assert {f["data"]["task_id"] for f in (next(stream) for _ in ids)} == set(ids)
    polls = [call for call in recorded if call[0] != "UpdateItem"]
    # every poll of five running tasks: ONE BatchGetItem, eventually consistent, and nothing else (GW-SSE-25)
    assert polls and set(polls) == {("BatchGetItem", False)}, polls


def test_fly_items_read_by_number_strongly_consistent_gw_sse_25_26(gw: Any) -> None:
    client, store, calls = gw
    (task_id,) = _create(client, 1)
    with client.stream("GET", f"/api/v1/mesh/events?ids={task_id}") as response:
        stream = _events(frames(response))
        next(stream)
        calls.taken()
        store.append_fly(task_id, [FlyValue(payload=v, actor="analyze", envelope_id=task_id) for v in ("x", "y")])
        got = [next(stream), next(stream)]
        assert [(f["id"], f["data"]["payload"]) for f in got] == [(f"{task_id}:2", "x"), (f"{task_id}:3", "y")]
        reads = {call for call in calls.taken() if call[0] != "UpdateItem" and call[0] != "PutItem"}
        store.cancel(task_id)
        assert next(stream)["data"]["status"] == "canceled"
    assert reads == {("BatchGetItem", False), ("BatchGetItem", True)}, reads


def test_resume_per_task_from_the_cursor_map_gw_sse_21(gw: Any) -> None:
    client, store, _ = gw
    first, second = _create(client, 2)
    for task_id in (first, second):
        store.append_fly(task_id, [FlyValue(payload="A", actor="analyze", envelope_id=task_id)])  # seq 2
        store.append_fly(task_id, [FlyValue(payload="B", actor="analyze", envelope_id=task_id)])  # seq 3
    store.report_final(first, status="succeeded", result={"r": 1})  # seq 4
    # first: everything sent; second: resumed after its seq 2
    with client.stream(
        "GET", f"/api/v1/mesh/events?ids={first},{second}", headers={"Last-Event-ID": f"{first}:4,{second}:2"}
    ) as response:
        stream = _events(frames(response))
        catchup = next(stream)
        assert (catchup["data"]["task_id"], catchup["data"]["status"]) == (second, "pending")
        replay = next(stream)
        assert (replay["id"], replay["data"]["payload"]) == (f"{first}:4,{second}:3", "B")
        store.cancel(second)
        assert next(stream)["id"] == f"{first}:4,{second}:4"
    done = client.get(f"/api/v1/mesh/events?ids={first},{second}", headers={"Last-Event-ID": f"{first}:4,{second}:4"})
    assert (done.status_code, done.content) == (204, b"")
    by_query = client.get(f"/api/v1/mesh/events?ids={first}&last_event_id={first}:9")
    assert by_query.status_code == 204


def test_without_ids_the_path_is_the_task_named_events_gw_gen_7(gw: Any) -> None:
    client, _, _ = gw
    response = client.get("/api/v1/mesh/events")
    assert (response.status_code, response.json()) == (404, {"error": "not found"})


def test_terminal_task_with_a_fly_number_still_held_ends_gw_sse_6_25(gw: Any) -> None:
    """A task that ends while its newest FLY flush has no item yet: the number is held back, then counted as a status
    change once the hold-back passes, and the terminal event still comes (the stream does not stall)."""
    client, store, _ = gw
    (task_id,) = _create(client, 1)
    # take a number for a flush whose item never arrives (its writer died between its two writes, P-STAT-16)
    store.dynamodb.update_item(
        TableName=store.table,
        Key={"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": "TASK"}},
        UpdateExpression="SET last_seq = last_seq + :one, fly_from = last_seq + :one, fly_to = last_seq + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    store.report_final(task_id, status="succeeded", result={"r": 1})  # seq 3
    # the held number and the terminal status are first seen by the same poll
    with client.stream("GET", f"/api/v1/mesh/events?ids={task_id}") as response:
        got = list(_events(frames(response)))
    assert [(f.get("id"), f["data"]["status"]) for f in got] == [(None, "succeeded"), (f"{task_id}:3", "succeeded")]
