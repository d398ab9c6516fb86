"""Retry policies on the local mesh (P-RES-5, P-RES-8, P-RES-12, P-RES-13, P-PROC-4, P-STAT-5, P-ROUTE-4, P-SINK-5):
``flaky`` fails twice and the third attempt succeeds; ``doomed`` always fails and its ``on_exhausted`` chain rescues
the task. Both tasks end ``succeeded``."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.checkpoints import task_checkpoint

pytestmark = pytest.mark.e2e


def test_flaky_actor_succeeds_on_the_third_attempt(flaky_mesh: LocalMesh, flaky_gateway: Any) -> None:
    gateway = flaky_gateway
    task_id = gateway.create(flow="wobbly", payload={"text": "steady"})
    events = gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded"

    retries = [e.json() for e in events if e.event == "status" and e.json().get("step") == "retrying"]
    assert [(r["current_actor"], r["attempt"], r["delay_seconds"]) for r in retries] == [
        ("flaky", 2, 3),
        ("flaky", 3, 3),
    ]
    assert retries[0]["error"] == "e2e_flaky_actors.UpstreamDownError: upstream down (call 1)"

    task = gateway.get(task_id)
    assert task["status"] == "succeeded"
    assert task["result"] == {"text": "steady", "prepared": True, "calls": 3}
    assert sys.modules["e2e_flaky_actors"].CALLS[task_id] == 3, "the handler ran exactly three times"

    final = task_checkpoint(flaky_mesh.clients.s3, flaky_mesh.resources.bucket, task)
    assert final["status"]["phase"] == "succeeded"
    assert final["status"]["actor"] == "flaky"
    assert (final["status"]["attempt"], final["status"]["max_attempts"]) == (3, 3)
    assert final["route"] == {"prev": ["prepare", "flaky"], "curr": "", "next": []}


def test_p_res_13_on_exhausted_chain_decides_the_task_outcome(flaky_mesh: LocalMesh, flaky_gateway: Any) -> None:
    task_id = flaky_gateway.create(flow="rescued", payload={"text": "lost cause"})
    events = flaky_gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded"
    # a retry without delay is over before the next poll: its retrying status may coalesce away (GW-SSE-3)
    retries = [e.json() for e in events if e.event == "status" and e.json().get("step") == "retrying"]
    assert [(r["current_actor"], r["attempt"]) for r in retries] in ([], [("doomed", 2)])

    task = flaky_gateway.get(task_id)
    assert task["status"] == "succeeded"
    assert task["result"] == {
        "recovered": {"text": "lost cause", "prepared": True},
        "cause": "e2e_flaky_actors.UpstreamDownError: no way to handle 'lost cause'",
    }
    final = task_checkpoint(flaky_mesh.clients.s3, flaky_mesh.resources.bucket, task)
    assert final["route"] == {"prev": ["prepare", "doomed", "fallback"], "curr": "", "next": []}
    assert final["status"]["actor"] == "fallback"
