"""A handler running past its time limit on the local mesh: the layer interrupts it on its worker thread and the task
ends ``failed`` with the timeout error at once (P-TIME-5, P-TIME-7, P-ERR-6, P-ERR-7, P-SUMP-4).

The ``stall`` actor (``timeout: 1``) sleeps for 120 s, longer than the flow's 60 s deadline, so only the
interruption can end the task with this error: without it the Lambda emulator's 11 s limit would crash the call and
the gateway backstop would later fail the task with ``task timed out`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.client import GatewayClient
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.checkpoints import task_checkpoint
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

E2E_DIR = Path(__file__).resolve().parent
MESSAGE = "handler exceeded its 1 s limit (actor timeout)"


@pytest.fixture(scope="module")
def timeout_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(E2E_DIR / "timeouts" / "asya.yaml"), port=0) as mesh:
        yield mesh


def test_p_time_7_stalled_actor_is_interrupted_and_the_task_fails_with_the_timeout(timeout_mesh: LocalMesh) -> None:
    created = httpx.post(
        f"{timeout_mesh.url}/api/v1/mesh/", params={"flow": "stalled"}, json={"payload": {"text": "x"}}, timeout=10
    )
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]

    with GatewayClient(timeout_mesh.url) as client:
        events = list(client.events(task_id).events())
    assert terminal_status(events[-1]) == "failed"
    assert events[-1].json()["error"] == MESSAGE

    task = httpx.get(f"{timeout_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    assert task["status"] == "failed"
    assert task["error"] == MESSAGE
    assert task["failed_actor"] == "stall"
    assert task["error_details"] == {"message": MESSAGE, "type": "HandlerTimeout"}

    # x-sump checkpointed the input envelope under failed/ (P-SUMP-4), reason HandlerTimeout, and attached that line
    # to the task the layer failed (P-STAT-2, issue 18 defect 9)
    s3 = timeout_mesh.clients.s3
    bucket = timeout_mesh.resources.bucket

    def attached() -> dict[str, Any] | None:
        view: dict[str, Any] = httpx.get(f"{timeout_mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
        return view if view.get("checkpoint_key") else None

    # x-sump may run after the layer's final status write, so the checkpoint may land after SSE showed the end
    task = wait_for(attached, "x-sump's checkpoint on the task")
    assert task["status"] == "failed" and task["checkpoint_key"].startswith("failed/")
    assert task["checkpoint_uri"] == f"s3://{bucket}/{task['checkpoint_key']}"
    sumped = task_checkpoint(s3, bucket, task)
    assert sumped["id"] == task_id
    assert sumped["status"]["reason"] == "HandlerTimeout"
    assert sumped["payload"]["original_payload"] == {"text": "x", "prepared": True}
