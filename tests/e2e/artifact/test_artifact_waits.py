"""Durable waits on what ``cdk deploy`` ships (P-WAIT-1..5): a small mesh of its own, synthesized and run by the
artifact mesh, whose flows sleep and wait for a signal (``tests/e2e/flowpause/flows/waits.py``). Every function runs
from the assembly under its own role behind the IAM proxy, so the calls a wait adds (the layer's delayed send to
x-resume, x-resume's read and re-send, x-pause's read and delivery of a buffered signal, the gateway's buffering
write, x-resume's expiry of a pause nobody resumed) must all be granted: each test ends with no call denied."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.timeutil import parse_ts
from asya_local.artifact.mesh import ArtifactMesh
from asya_local.iam import MISSING_KEY
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]

REPO = Path(__file__).resolve().parents[3]
FLOWS = REPO / "tests" / "e2e" / "flowpause" / "flows" / "waits.py"
ESCALATE = REPO / "tests" / "e2e" / "flowpause" / "flows" / "escalate.py"


def _manifest() -> dict[str, Any]:
    code = str(REPO / "functions")
    return {
        "namespace": "waits",
        "actors": {
            "normalize": {"handler": "text.normalize", "code": code},
            "publish": {"handler": "text.publish", "code": code},
        },
        "flows": {
            "nap": {"source": str(FLOWS), "timeout": 120},
            "signaled": {"source": str(FLOWS), "timeout": 120},
            "escalate": {"source": str(ESCALATE), "timeout": 120},
        },
    }


@pytest.fixture(scope="module")
def waits_mesh(
    own_mesh: Callable[[dict[str, Any], str], AbstractContextManager[ArtifactMesh]],
) -> Iterator[ArtifactMesh]:
    with own_mesh(_manifest(), "waits") as mesh:
        yield mesh


@pytest.fixture
def mesh(waits_mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    """The mesh for one test, which ends with no call denied (named when one was). One refusal is not a missing
    grant: the gateway's read of ``paused/{id}.json`` for a paused task's view (GW-TASK-10) in the moment before
    x-pause stored it is a 403 in AWS (``GetObject`` of a missing key without a bucket-wide ``s3:ListBucket``), which
    ``asya.missingkey`` tells from a denied read by a listing of that key the role is granted."""
    waits_mesh.clear_denied()
    yield waits_mesh
    denied = [
        record
        for record in waits_mesh.denied()
        if not (MISSING_KEY in record and "operation='GetObject'" in record and "GatewayFunction" in record)
    ]
    assert denied == [], f"calls denied during the test: {denied}"


def _create(mesh: ArtifactMesh, flow: str) -> str:
    response = httpx.post(f"{mesh.url}/api/v1/mesh/", params={"flow": flow}, json={"payload": {"text": "a day"}})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _in(mesh: ArtifactMesh, task_id: str, status: str) -> dict[str, Any] | None:
    view: dict[str, Any] = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    return view if view.get("status") == status else None


def test_p_wait_3_a_sleep_runs_on_the_shipped_functions(mesh: ArtifactMesh) -> None:
    task_id = _create(mesh, "nap")
    done = wait_for(lambda: _in(mesh, task_id, "succeeded"), "the flow to sleep and go on", limit=180)
    assert done["result"]["slept"] is True
    created, finished = parse_ts(done["created_at"]), parse_ts(done["updated_at"])
    assert created is not None and finished is not None and (finished - created).total_seconds() >= 2


def _signal(mesh: ArtifactMesh, task_id: str) -> httpx.Response:
    """POST the signal; the moment between x-pause's status write and its file answers 409, which a client retries."""

    def once() -> httpx.Response | None:
        url = f"{mesh.url}/api/v1/mesh/{task_id}/signal"
        answer = httpx.post(url, json={"event": "approved", "data": True}, timeout=10)
        return None if answer.status_code == 409 and "no stored envelope" in answer.text else answer

    answer: httpx.Response = wait_for(once, "the gateway to take the signal", limit=60)
    return answer


def test_p_wait_4_a_signal_ends_a_wait_for_on_the_shipped_functions(mesh: ArtifactMesh) -> None:
    task_id = _create(mesh, "signaled")
    wait_for(lambda: _in(mesh, task_id, "paused"), "the flow to wait for its event", limit=180)
    answer = _signal(mesh, task_id)
    assert answer.status_code == 202 and answer.json()["delivered"] is True, answer.text
    done = wait_for(lambda: _in(mesh, task_id, "succeeded"), "the signaled flow to succeed", limit=180)
    assert done["result"]["approved"] is True and done["result"]["published"] is True


def test_p_wait_5_a_signal_before_the_wait_is_taken_on_the_shipped_functions(mesh: ArtifactMesh) -> None:
    """Sent right after the create: buffered by the gateway and taken by x-pause, or, on a slow box where the flow
    already waits, delivered by the gateway; the task succeeds with the data either way."""
    task_id = _create(mesh, "signaled")
    answer = _signal(mesh, task_id)
    assert answer.status_code == 202, answer.text
    done = wait_for(lambda: _in(mesh, task_id, "succeeded"), "the flow to take the early signal", limit=180)
    assert done["result"]["approved"] is True and done["result"]["published"] is True


def test_p_wait_1_a_pause_nobody_resumes_times_out_into_the_flows_except_on_the_shipped_functions(
    mesh: ArtifactMesh,
) -> None:
    """x-pause sends the expiry, x-resume makes the conditional paused -> running write (the ``pause.expire`` grant,
    P-WAIT-2) and raises TimeoutError at the pause, which the flow's ``except`` turns into an escalation."""
    task_id = _create(mesh, "escalate")
    done = wait_for(lambda: _in(mesh, task_id, "succeeded"), "the pause to time out and the flow to go on", limit=180)
    # publish ran after the pause (it publishes only what was approved, and nobody approved)
    assert done["result"]["escalated"] is True and done["result"]["published"] is False
