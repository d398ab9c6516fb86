"""One stream, many tasks over the local mesh (GW-SSE (R3), docs/http.md GW-SSE-20..27): real actors run the
example flow; ``asya watch`` with several ids and ``GatewayClient.watch`` follow them on one stream to their ends."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from asya_local.cli import main
from asya_local.client import GatewayClient
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import Gateway

pytestmark = pytest.mark.e2e


def test_client_watch_follows_several_tasks_to_their_ends_gw_sse_23(local_mesh: LocalMesh, gateway: Gateway) -> None:
    ids = [gateway.create(flow="text-pipeline", payload={"text": f"Task number {n} is GREAT"}) for n in range(3)]
    with GatewayClient(local_mesh.url) as client:
        events = list(client.watch(ids).events())
    by_task: dict[str, list[tuple[str, dict[str, object]]]] = {}
    for event in events:
        data = json.loads(event.data)
        by_task.setdefault(str(data["task_id"]), []).append((event.event, data))
    assert set(by_task) == set(ids)
    for task_id, got in by_task.items():
        # each task: its catch-up, then ... its terminal status, the last of its events; summarize streams FLY values
        assert got[-1][0] == "status" and got[-1][1]["status"] == "succeeded", (task_id, got)
        assert any(name == "fly" for name, _ in got), got
    # the cursor map of the last event names every task at its terminal number (GW-SSE-21)
    last = events[-1].id or ""
    assert {pair.rpartition(":")[0] for pair in last.split(",")} == set(ids)
    for task_id in ids:
        assert gateway.get(task_id)["status"] == "succeeded"


def test_asya_watch_with_several_ids_prints_one_transcript(local_mesh: LocalMesh, gateway: Gateway) -> None:
    ids = [gateway.create(flow="text-pipeline", payload={"text": "Hello there"}) for _ in range(2)]
    out, err = io.StringIO(), io.StringIO()
    code = main(["watch", *ids, "--url", local_mesh.url], env={}, stdout=out, stderr=err, cwd=Path(__file__).parent)
    assert code == 0, err.getvalue()
    data = [json.loads(line[len("data: ") :]) for line in out.getvalue().splitlines() if line.startswith("data: ")]
    finals = {d["task_id"] for d in data if d.get("status") == "succeeded"}
    assert finals == set(ids)
