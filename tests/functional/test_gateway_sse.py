"""The SSE stream ``GET /api/v1/mesh/{id}/events`` over real HTTP against moto (GW-SSE-1 .. GW-SSE-11, GW-BACK-3).

The store is driven from the test thread while the stream is open; the gateway polls every 10 ms. Assertions are on
the sequence of frames only, never on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from asya.store import FlyValue, Snapshot, TaskStore
from asya_gateway import GatewayConfig, create_app
from tests.clocks import ManualClock
from tests.sse import frames

pytestmark = pytest.mark.functional

#: A flush takes a number, then writes its item: a poll between the two holds the number back for ``sse_gap_wait``.
#: 2 s covers the gap on a loaded box (0.05 s could count a late item's number as a status change and skip its value).
FAST = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=2.0)


@dataclass
class Gw:
    client: httpx.Client
    store: TaskStore
    clock: ManualClock

    def create(self, query: str, body: dict[str, Any] | None = None) -> str:
        response = self.client.post(f"/api/v1/mesh/?{query}", json=body or {})
        assert response.status_code == 201, response.text
        task_id: str = response.json()["id"]
        return task_id

    def fly(self, task_id: str, value: Any) -> None:
        assert self.store.append_fly(task_id, [FlyValue(payload=value, actor="normalize", envelope_id=task_id)])


def _gateway(mesh: Any, serve_asgi: Any, config: GatewayConfig) -> Gw:
    clock = ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))
    store = mesh.store(clock)
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    return Gw(client=httpx.Client(base_url=serve_asgi(app)), store=store, clock=clock)


@pytest.fixture
def gw(mesh: Any, serve_asgi: Any) -> Iterator[Gw]:
    gateway = _gateway(mesh, serve_asgi, FAST)
    with gateway.client:
        yield gateway


def test_catchup_replay_and_live_events_until_terminal_gw_sse_4_to_7(gw: Gw) -> None:
    task_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})
    gw.store.report_running(
        task_id,
        step="processing",
        actor="normalize",
        route_prev=[],
        route_curr="normalize",
        route_next=["analyze", "summarize"],
    )
    gw.fly(task_id, "A")  # seq 3; L = 3
    with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        stream = frames(response)
        catchup = next(stream)
        assert set(catchup) == {"retry", "event", "data"}
        assert catchup["retry"] == 1000
        assert catchup["event"] == "status"
        assert catchup["data"]["status"] == "running"
        assert catchup["data"]["current_actor"] == "normalize"
        assert catchup["data"]["progress_percent"] == 16.7
        replayed = next(stream)
        assert replayed == {
            "id": 3,
            "event": "fly",
            "data": {"payload": "A", "actor": "normalize", "envelope_id": task_id},
        }
        gw.fly(task_id, "B")
        assert next(stream)["data"]["payload"] == "B"
        gw.store.report_final(task_id, status="succeeded", result={"summary": "ok"})
        final = next(stream)
        assert (final["id"], final["event"]) == (5, "status")
        assert final["data"]["status"] == "succeeded"
        assert final["data"]["result"] == {"summary": "ok"}
        assert list(stream) == []


def test_terminal_task_replays_fly_then_closes_and_204_past_end_gw_sse_6_8(gw: Gw) -> None:
    task_id = gw.create("actor=analyze")
    gw.fly(task_id, "partial")  # seq 2
    gw.store.report_final(task_id, status="failed", error="boom")  # seq 3
    with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
        got = list(frames(response))
    # R2: the terminal catch-up (no id), the replay, then the terminal status itself with id L, and the stream ends
    assert [(f.get("id"), f["event"]) for f in got] == [(None, "status"), (2, "fly"), (3, "status")]
    assert got[0]["data"]["status"] == got[2]["data"]["status"] == "failed"
    assert got[0]["data"]["error"] == got[2]["data"]["error"] == "boom"
    with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events", headers={"Last-Event-ID": "2"}) as response:
        assert [(f.get("id"), f["event"]) for f in frames(response)] == [(None, "status"), (3, "status")]
    past = gw.client.get(f"/api/v1/mesh/{task_id}/events", headers={"Last-Event-ID": "3"})
    assert (past.status_code, past.content) == (204, b"")
    by_query = gw.client.get(f"/api/v1/mesh/{task_id}/events?last_event_id=7")
    assert by_query.status_code == 204
    # the header wins over the query parameter
    with gw.client.stream(
        "GET", f"/api/v1/mesh/{task_id}/events?last_event_id=3", headers={"Last-Event-ID": "0"}
    ) as response:
        assert response.status_code == 200
        assert [f["event"] for f in frames(response)] == ["status", "fly", "status"]


def test_unknown_id_and_bad_last_event_id_gw_sse_1(gw: Gw) -> None:
    missing = gw.client.get("/api/v1/mesh/no-such-task/events")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    task_id = gw.create("actor=analyze")
    bad = gw.client.get(f"/api/v1/mesh/{task_id}/events", headers={"Last-Event-ID": "-1"})
    assert (bad.status_code, bad.json()) == (400, {"error": "Last-Event-ID must be a non-negative integer, got '-1'"})


def test_stream_applies_read_path_backstop_gw_sse_9_gw_back_3(gw: Gw) -> None:
    task_id = gw.create("actor=analyze", {"timeout": 5})
    with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
        stream = frames(response)
        assert next(stream)["data"]["status"] == "pending"
        gw.clock.now += timedelta(seconds=6)
        final = next(stream)
        assert final["id"] == 2
        assert final["data"]["status"] == "failed"
        assert final["data"]["error"] == "task timed out"
        assert list(stream) == []


def test_keepalive_and_end_after_max_duration_gw_sse_9(mesh: Any, serve_asgi: Any) -> None:
    # max_seconds is checked before the keepalive after each poll: 3 s leaves a loaded box time for the first poll
    # (0.1 s ended some streams before any keepalive); the cut itself is timed on a fake clock in
    # tests/unit/test_gateway_sse_loop.py
    config = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_keepalive=0.0, sse_max_seconds=3.0)
    gateway = _gateway(mesh, serve_asgi, config)
    with gateway.client:
        task_id = gateway.create("actor=analyze")
        with gateway.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
            got = list(frames(response))
    assert got[0]["data"]["status"] == "pending"
    assert {"comment": "keepalive"} in got[1:]
    assert all("event" not in frame for frame in got[1:])


class _GatedStore(TaskStore):
    """A store whose follower reads wait for ``gate``: a test makes its writes land between two polls, for sure."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = threading.Event()

    def snapshot(self, task_id: str, after_seq: int) -> Snapshot | None:
        assert self.gate.wait(30), "the test never opened the gate"
        return super().snapshot(task_id, after_seq)


def test_a_claim_and_its_values_read_in_one_poll_never_repeat_an_id_gw_sse_3_6_28(mesh: Any, serve_asgi: Any) -> None:
    """A claim (3) and a flush of two values (4, 5) land between two polls: the status event comes before the values
    with id 3, so every id is new. Sent after them with id ``last_seq`` it repeated the id of fly 5 (the artifact
    suite's first stream got id 15 twice on a loaded machine, where polls are late and such pairs common)."""
    clock = ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))
    store = _GatedStore(
        table=mesh.resources.table,
        bucket=mesh.resources.bucket,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=clock,
    )
    app = create_app(FAST, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    gw = Gw(client=httpx.Client(base_url=serve_asgi(app)), store=store, clock=clock)
    hop = {"route_prev": [], "route_curr": "normalize", "route_next": ["analyze", "summarize"]}
    with gw.client:
        task_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})
        gw.store.report_running(task_id, step="processing", actor="normalize", **hop)  # seq 2 = L
        with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
            stream = frames(response)
            assert next(stream)["data"]["current_actor"] == "normalize"  # the catch-up; the first poll waits
            hop = {"route_prev": ["normalize"], "route_curr": "analyze", "route_next": ["summarize"]}
            gw.store.report_running(task_id, step="processing", actor="analyze", **hop)  # seq 3
            gw.fly(task_id, "A")  # seq 4
            gw.fly(task_id, "B")  # seq 5
            store.gate.set()
            got = [next(stream) for _ in range(3)]
            assert [(f["id"], f["event"]) for f in got] == [(3, "status"), (4, "fly"), (5, "fly")]
            assert got[0]["data"]["current_actor"] == "analyze"
            gw.store.report_final(task_id, status="succeeded", result={"summary": "ok"})
            assert [(f["id"], f["event"]) for f in stream] == [(6, "status")]
