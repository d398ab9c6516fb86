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


def test_p_wait_1_a_pause_nobody_resumes_raises_timeout_error_and_the_flow_escalates(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="escalate", payload={"text": "a good day"})
    paused = wait_for(lambda: _status_is(client, task_id, "paused"), "the flow to pause")
    assert paused["pause_metadata"]["timeout"] == 2
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the pause to time out and the flow to go on")
    result = done["result"]
    assert result["escalated"] is True and result["published"] is False
    assert "approved" not in result
    assert _paused_object(pause_mesh, task_id) == 0
    # a resume after the expiry is refused, and says why (P-WAIT-2)
    late = httpx.post(f"{pause_mesh.url}/api/v1/mesh/{task_id}/resume", json={"input": {"approved": True}}, timeout=10)
    assert late.status_code == 409, late.text
    assert late.json()["error"].startswith("the pause timed out at ")
    assert late.json()["error"].endswith("task is not paused (status: succeeded)")


def test_p_wait_1_an_uncaught_pause_timeout_fails_the_task_at_the_manifest_cap(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="expire", payload={"text": "a good day"})
    failed = wait_for(lambda: _status_is(client, task_id, "failed"), "the pause to time out and fail the task")
    assert "pause timed out after 1 s" in failed["error"]


def test_p_wait_2_a_resume_in_time_wins_and_its_expiry_comes_to_nothing(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="patient", payload={"text": "a good day"})
    paused = wait_for(lambda: _status_is(client, task_id, "paused"), "the flow to pause")
    assert paused["pause_metadata"]["timeout"] == 600
    wait_for(lambda: _paused_object(pause_mesh, task_id), "x-pause to store the paused envelope")
    answer = httpx.post(
        f"{pause_mesh.url}/api/v1/mesh/{task_id}/resume", json={"input": {"approved": True}}, timeout=10
    )
    assert answer.status_code == 202, answer.text
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the resumed flow to succeed")
    assert done["result"]["published"] is True and "escalated" not in done["result"]


def test_p_wait_3_a_sleep_delays_the_flow_without_an_actor_and_the_flow_goes_on(pause_mesh: LocalMesh) -> None:
    from asya.timeutil import parse_ts

    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="nap", payload={"text": "a good day"})
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the flow to sleep and go on")
    assert done["result"]["slept"] is True and done["result"]["published"] is False
    created, finished = parse_ts(done["created_at"]), parse_ts(done["updated_at"])
    assert created is not None and finished is not None
    assert (finished - created).total_seconds() >= 2  # the sleep happened (a lower bound: never flaky)


def test_p_wait_4_asya_signal_ends_a_wait_for_and_its_data_lands_at_the_path(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="signaled", payload={"text": "a good day"})
    paused = wait_for(lambda: _status_is(client, task_id, "paused"), "the flow to wait for its event")
    assert paused["pause_metadata"]["event"] == "approved"
    wait_for(lambda: _paused_object(pause_mesh, task_id), "x-pause to store the paused envelope")
    out, err = io.StringIO(), io.StringIO()
    argv = ["signal", task_id, "approved", "--data", "true", "--url", pause_mesh.url]
    assert main(argv, env={}, stdout=out, stderr=err) == 0, err.getvalue()
    assert json.loads(out.getvalue())["delivered"] is True
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the signaled flow to succeed")
    assert done["result"]["approved"] is True and done["result"]["published"] is True


def test_p_wait_5_a_signal_sent_before_the_wait_is_taken_when_the_flow_waits(pause_mesh: LocalMesh) -> None:
    client = Gateway(pause_mesh.url)
    task_id = client.create(flow="signaled", payload={"text": "a good day"})

    def signal() -> httpx.Response | None:
        url = f"{pause_mesh.url}/api/v1/mesh/{task_id}/signal"
        answer = httpx.post(url, json={"event": "approved", "data": True}, timeout=10)
        # 409 only in the moment between x-pause's status write and its file, which a client retries (GW-SIGNAL-2)
        if answer.status_code == 409 and "no stored envelope" in answer.text:
            return None
        return answer

    answer = wait_for(signal, "the gateway to take the signal")
    assert answer.status_code == 202, answer.text
    done = wait_for(lambda: _status_is(client, task_id, "succeeded"), "the flow to take the early signal")
    assert done["result"]["approved"] is True and done["result"]["published"] is True
