"""A compiled flow that pauses inside a branch, end to end over HTTP in the local mode: the continuation header
survives x-pause and x-resume, x-resume runs the rest of the flow (P-FLOW-7), and a timeout block around the call
after it sets and restores the deadline (P-FLOW-12)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import E2E_DIR, Gateway
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pause_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(E2E_DIR / "flowpause" / "asya.yaml"), port=0) as mesh:
        yield mesh


def _status_is(client: Gateway, task_id: str, status: str) -> dict[str, Any] | None:
    task = client.get(task_id)
    return task if task["status"] == status else None


def _paused_object(mesh: LocalMesh, task_id: str) -> int:
    found = mesh.clients.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix=f"paused/{task_id}.json")
    return int(found.get("KeyCount", 0))


def test_p_flow_7_pause_in_a_branch_then_resume_runs_the_rest_of_the_flow(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="approve", payload={"text": "a good day"})
    paused = wait_for(lambda: _status_is(client, task_id, "paused"), "the flow to pause at x-pause")
    assert paused["pause_metadata"]["prompt"] == "Publish it?"
    assert [f["name"] for f in paused["pause_metadata"]["fields"]] == ["approved"]
    wait_for(lambda: _paused_object(pause_mesh, task_id), "x-pause to store the paused envelope")
    # what the reviewer approves: the state the flow reached (analyze's sentiment), not the input (GW-TASK-10)
    out, err = io.StringIO(), io.StringIO()
    assert main(["status", task_id, "--url", pause_mesh.url], env={}, stdout=out, stderr=err) == 0, err.getvalue()
    shown = json.loads(out.getvalue())
    assert shown["payload"] == {"text": "a good day"}
    assert shown["paused_state"]["text"] == "a good day" and shown["paused_state"]["sentiment"] != "negative"
    assert "Publish it?" in err.getvalue()
    answer = httpx.post(
        f"{pause_mesh.url}/api/v1/mesh/{task_id}/resume", json={"input": {"approved": True}}, timeout=10
    )
    assert answer.status_code in (200, 202), answer.text
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the resumed flow to succeed")
    result = done["result"]
    assert result["approved"] is True and result["published"] is True and result["checked"] is True
    assert "x-asya-flow-state" not in result


def test_the_other_branch_never_pauses(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="approve", payload={"text": "a bad and awful day"})
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the flow to succeed")
    assert done["result"]["approved"] is False and "published" not in done["result"]


def test_a_flow_over_4_kb_runs_with_its_programs_read_from_the_flows_file(pause_mesh: LocalMesh) -> None:
    """Issue 29: the mesh ships programs too large for the environment as a file (ASYA_FLOWS_FILE), as the CDK app
    does; the flow's 80 mutations run in the layer from it."""
    from asya_deploy.environment import flows_file_text
    from tests.bigflow import big_flow_source

    source = (E2E_DIR / "flowpause" / "flows" / "big.py").read_text()
    assert source.endswith(big_flow_source(first="normalize", last="analyze"))
    assert flows_file_text(pause_mesh.manifest) is not None
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="big", payload={"text": "a good day", "items": [1, 2]})
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the big flow to succeed")
    result = done["result"]
    assert [result[f"k{i}"] for i in (0, 41, 79)] == [2, 43, 81]
    assert "sentiment" in result  # analyze ran after the mutations
