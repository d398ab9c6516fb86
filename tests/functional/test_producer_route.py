"""The producer route is for reporters only (GW-EVT-1/3 R3; issue 25 defect 1), over real HTTP against moto.

A client's API key never reaches it (the forged ``paused`` and ``succeeded`` posts of the issue), a reporter may not
post the crew's statuses, and a reporter's event for a hop whose fence moved on is stale (204, nothing changes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.manifest import GatewayAuth
from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from tests.asgi import asgi_client
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
CLIENT_KEY = "client-key-1"
REPORTER_KEY = "reporter-key-1"
FORGED_PAUSE = {"type": "status", "status": "paused", "data": {"pause_metadata": {"prompt": "x"}}}
FORGED_SUCCESS = {"type": "status", "status": "succeeded", "data": {"result": {"forged": True}}}


@dataclass
class Gw:
    client: httpx.Client
    store: TaskStore

    def running_task(self) -> str:
        created = self.client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "hi"}})
        assert created.status_code == 201, created.text
        task_id: str = created.json()["id"]
        claimed = self.store.running(
            task_id,
            step="processing",
            actor="normalize",
            route_prev=[],
            route_curr="normalize",
            route_next=["analyze", "summarize"],
            claim=(1, 1, 0),
        )
        assert claimed.accepted
        return task_id

    def view(self, task_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/mesh/{task_id}")
        assert response.status_code == 200
        body: dict[str, Any] = response.json()
        return body

    def post(self, task_id: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        return self.client.post(f"/api/v1/mesh/{task_id}/events", json=body, headers=headers)


@pytest.fixture
def gw(mesh: Any) -> Iterator[Gw]:
    store = mesh.store(ManualClock(START))
    auth = GatewayAuth(mode="api_key", api_key_secret="unused-keys-from-config")
    manifest = mesh.manifest.model_copy(update={"gateway": mesh.manifest.gateway.model_copy(update={"auth": auth})})
    config = GatewayConfig(api_keys=(CLIENT_KEY,), reporter_keys=(REPORTER_KEY,))
    app = create_app(config, manifest=manifest, store=store, sqs=mesh.aws.sqs)
    with asgi_client(app, headers={"X-API-Key": CLIENT_KEY}) as client:
        yield Gw(client=client, store=store)


@pytest.mark.parametrize("forged", [FORGED_PAUSE, FORGED_SUCCESS], ids=["paused", "succeeded"])
@pytest.mark.parametrize(
    "credentials",
    [{"X-API-Key": CLIENT_KEY}, {"Authorization": f"Bearer {CLIENT_KEY}"}, {"X-Asya-Reporter-Key": CLIENT_KEY}],
    ids=["api-key", "bearer", "client-key-as-reporter-key"],
)
def test_gw_evt_1_r3_a_client_credential_never_reaches_the_producer_route(
    gw: Gw, forged: dict[str, Any], credentials: dict[str, str]
) -> None:
    """GW-EVT-1 (R3): issue 25's forged posts with a client's key: 401, and the running task is unchanged."""
    task_id = gw.running_task()
    before = gw.view(task_id)
    response = gw.post(task_id, forged, credentials)
    assert response.status_code == 401
    assert response.json()["error"] in ("reporter credential required: send X-Asya-Reporter-Key", "invalid credentials")
    assert gw.view(task_id) == before


@pytest.mark.parametrize("status", ["paused", "succeeded", "failed", "canceled"])
def test_gw_evt_3_r3_crew_statuses_are_refused_to_a_reporter(gw: Gw, status: str) -> None:
    """GW-EVT-3 (R3): with the reporter key, paused/succeeded/failed/canceled answer 400 and change nothing."""
    task_id = gw.running_task()
    before = gw.view(task_id)
    body = FORGED_PAUSE if status == "paused" else {**FORGED_SUCCESS, "status": status}
    response = gw.post(task_id, body, {"X-Asya-Reporter-Key": REPORTER_KEY})
    assert (response.status_code, response.json()) == (400, {"error": f"status '{status}' is written by the crew only"})
    assert gw.view(task_id) == before


def test_gw_evt_3_r3_a_report_for_a_hop_whose_fence_moved_on_is_stale(gw: Gw) -> None:
    """GW-EVT-3 (R3): the task's fence is at hop 2 (analyze claimed): a late ``completed`` of hop 1 (normalize, prev
    []) answers 204 and changes nothing; a report of the current hop still lands."""
    task_id = gw.running_task()
    assert gw.store.running(
        task_id,
        step="processing",
        actor="analyze",
        route_prev=["normalize"],
        route_curr="analyze",
        route_next=["summarize"],
        claim=(2, 1, 0),
    ).accepted
    before = gw.view(task_id)
    late = {
        "type": "status",
        "status": "completed",
        "data": {"prev": [], "curr": "normalize", "next": ["analyze", "summarize"], "message": "late"},
    }
    response = gw.post(task_id, late, {"X-Asya-Reporter-Key": REPORTER_KEY})
    assert response.status_code == 204
    assert gw.view(task_id) == before
    current = {
        "type": "status",
        "status": "completed",
        "data": {"prev": ["normalize"], "curr": "analyze", "next": ["summarize"]},
    }
    assert gw.post(task_id, current, {"X-Asya-Reporter-Key": REPORTER_KEY}).status_code == 204
    assert gw.view(task_id)["step"] == "completed"


def test_gw_evt_1_r3_a_reporter_posts_running_and_fly(gw: Gw) -> None:
    """GW-EVT-1 (R3): ``running`` (and the steps) and ``fly`` work with the reporter key."""
    task_id = gw.running_task()
    key = {"X-Asya-Reporter-Key": REPORTER_KEY}
    running = {"type": "status", "status": "running", "data": {"curr": "normalize", "progress_percent": 20}}
    assert gw.post(task_id, running, key).status_code == 204
    assert gw.post(task_id, {"type": "fly", "data": {"token": "a"}}, key).status_code == 204
    view = gw.view(task_id)
    assert (view["status"], view["progress_percent"]) == ("running", 20)
    snap = gw.store.snapshot(task_id, 0)
    assert snap is not None
    assert [event["data"]["payload"] for event in snap.fly] == [{"token": "a"}]


def test_gw_evt_1_r3_without_reporter_keys_the_route_refuses_everyone(mesh: Any) -> None:
    """GW-EVT-1 (R3): the secure default: no reporter key configured (auth mode none) means no reporter."""
    store = mesh.store(ManualClock(START))
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs)
    with asgi_client(app) as client:
        task_id = client.post("/api/v1/mesh/?actor=analyze", json={"payload": {}}).json()["id"]
        for headers in ({}, {"X-Asya-Reporter-Key": "guess"}):
            response = client.post(f"/api/v1/mesh/{task_id}/events", json={"type": "fly", "data": 1}, headers=headers)
            assert response.status_code == 401
        assert client.get(f"/api/v1/mesh/{task_id}").status_code == 200, "other routes follow the auth mode"
