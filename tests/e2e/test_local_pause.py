"""Pause and resume end to end over HTTP in the local mesh: the example's ``reviewed-text`` flow pauses at x-pause,
a client reads the prompt and the frozen deadline, resumes with its input and the same task succeeds (PROTOCOL 12.4,
12.5; GATEWAY section 9, GW-TASK-1, GW-CANCEL-2, GW-BACK-5)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from asya_local.mesh import LocalMesh
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

FLOW = "reviewed-text"


def _status_is(gateway: Any, task_id: str, status: str) -> dict[str, Any] | None:
    view: dict[str, Any] = gateway.get(task_id)
    return view if view["status"] == status else None


def _paused_object(mesh: LocalMesh, task_id: str) -> int:
    found = mesh.clients.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix=f"paused/{task_id}.json")
    return int(found.get("KeyCount", 0))


def test_p_pause_5_pause_then_resume_succeeds_on_the_same_id_over_http(local_mesh: LocalMesh, gateway: Any) -> None:
    task_id = gateway.create(flow=FLOW, payload={"text": "What a GREAT day"})
    # the file first, as in the cancel test below: no view reads in the gap between the paused status and the file
    wait_for(lambda: _paused_object(local_mesh, task_id), "x-pause to store the paused envelope")
    paused = wait_for(lambda: _status_is(gateway, task_id, "paused"), "the task to pause at x-pause")
    assert paused["pause_metadata"]["prompt"].startswith("Publish this positive text?")
    assert [f["name"] for f in paused["pause_metadata"]["fields"]] == ["approved", "note"]
    assert paused["deadline_at"] is None  # frozen (GW-TASK-1)
    assert 0 < paused["remaining_seconds"] <= 600
    # the paused write comes before the file (P-PAUSE-5): a resume may meet the gap and get 409, then retry
    wait_for(lambda: _paused_object(local_mesh, task_id), "x-pause to store the paused envelope")

    url = f"{local_mesh.url}/api/v1/mesh/{task_id}/resume"
    bad = httpx.post(url, json={"input": {"note": "looks fine"}}, timeout=10)
    assert (bad.status_code, bad.json()) == (400, {"error": "missing required field 'approved'"})
    answer = httpx.post(url, json={"input": {"approved": True, "note": "looks fine"}}, timeout=10)
    assert answer.status_code == 202, answer.text
    assert answer.json()["id"] == task_id and answer.json()["status"] == "running"
    assert answer.json()["deadline_at"] is not None  # renewed from remaining_seconds (P-RESUME-1)

    done = wait_for(lambda: _status_is(gateway, task_id, "succeeded"), "the resumed task to succeed")
    result = done["result"]
    assert result["published"] is True
    assert result["approved"] is True
    assert result["review"] == {"note": "looks fine"}  # the field's payload_key (P-RESUME-4)
    assert result["sentiment"] == "positive"
    wait_for(lambda: not _paused_object(local_mesh, task_id), "x-resume to delete the paused envelope")

    again = httpx.post(url, json={"input": {"approved": True}}, timeout=10)
    assert (again.status_code, again.json()) == (409, {"error": "task is not paused (status: succeeded)"})
    unknown = httpx.post(f"{local_mesh.url}/api/v1/mesh/no-such-task/resume", json={"input": {}}, timeout=10)
    assert unknown.status_code == 404


def test_gw_cancel_2_cancel_while_paused_over_http(local_mesh: LocalMesh, gateway: Any) -> None:
    task_id = gateway.create(flow=FLOW, payload={"text": "a sad story"})
    # the file first: x-pause stores it after the paused status, so no view below reads in the gap between the two
    # (on the artifact mesh such a read is S3's 403 for a missing key, which the suite counts as a refusal)
    wait_for(lambda: _paused_object(local_mesh, task_id), "x-pause to store the paused envelope")
    assert _status_is(gateway, task_id, "paused")
    assert httpx.delete(f"{local_mesh.url}/api/v1/mesh/{task_id}", timeout=10).status_code == 204
    assert gateway.get(task_id)["status"] == "canceled"
    assert _paused_object(local_mesh, task_id) == 0


def test_the_test_client_returns_at_a_pause_and_resumes(local_mesh: LocalMesh) -> None:
    """``MeshClient.call`` returns the paused view instead of following a paused task forever, and ``resume`` takes
    it to its end (issue 28: a user's test hung for 9.5 minutes on a pause)."""
    from asya_local.client import GatewayClient
    from asya_local.testing import MeshClient

    with GatewayClient(local_mesh.url) as client:
        mesh = MeshClient(local_mesh, client)
        paused = mesh.call(FLOW, {"text": "What a GREAT day"})
        assert paused["status"] == "paused"
        assert [f["name"] for f in paused["pause_metadata"]["fields"]] == ["approved", "note"]
        done = mesh.resume(paused["id"], {"approved": True, "note": "ship it"})
        assert done["status"] == "succeeded", done
        assert done["result"]["published"] is True
        assert done["result"]["review"] == {"note": "ship it"}
