"""A gateway restart under a live SSE follower (the chaos harness's gateway-restart fault, issue 18): the local
gateway is served again on the same port while a task runs; the old gateway drains, ending the follower's stream at
its next poll, and the EventSource-style client (``asya_local.sse.SseStream``) resumes it with ``Last-Event-ID`` and
gets the terminal status (GW-SSE-5, GW-SSE-7, GW-SSE-9). The task itself never notices: actors, moto and the store
keep running."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from asya_local.sse import SseStream, terminal_status
from tests.e2e.conftest import E2E_DIR

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def napping_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(E2E_DIR / "tasks" / "asya.yaml"), port=0) as mesh:
        yield mesh


def test_gw_sse_9_a_follower_resumes_across_a_gateway_restart_and_gets_the_terminal_status(
    napping_mesh: LocalMesh, gate: Path
) -> None:
    url = napping_mesh.url
    payload = {"seconds": 15, "gate": str(gate)}  # naps until the restart is over, however slow the box is
    created = httpx.post(f"{url}/api/v1/mesh/", params={"flow": "napping"}, json={"payload": payload})
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    statuses: list[str] = []

    def restart_then_wake() -> None:
        napping_mesh.restart_gateway()
        gate.touch()

    restart = threading.Thread(target=restart_then_wake, name="restart")
    with httpx.Client(timeout=httpx.Timeout(10, read=20)) as http:
        stream = SseStream(http, f"{url}/api/v1/mesh/{task_id}/events", max_retries=20)
        for event in stream.events():
            if event.event != "status":
                continue
            statuses.append(str(event.json()["status"]))
            if restart.ident is None and statuses[-1] == "running":
                restart.start()
            if terminal_status(event) is not None:
                break
    restart.join(30)
    assert statuses[-1] == "succeeded", statuses
    assert stream.reconnects >= 1, "the restart did not end the stream"
    assert napping_mesh.url == url
    view = httpx.get(f"{url}/api/v1/mesh/{task_id}").json()
    assert view["status"] == "succeeded"
    assert view["result"] == {**payload, "rested": True}


def test_restart_gateway_serves_on_the_same_port_and_refuses_nothing_after_health(napping_mesh: LocalMesh) -> None:
    before = napping_mesh.url
    napping_mesh.restart_gateway()
    assert napping_mesh.url == before
    assert httpx.get(f"{before}/health").status_code == 200
