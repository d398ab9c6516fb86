"""A handler running past its time limit on the local mesh: the layer interrupts it on its worker thread and the task
ends ``failed`` with the timeout error at once (P-TIME-5, P-TIME-7, P-ERR-6, P-ERR-7, P-SUMP-4).

The ``stall`` actor (``timeout: 1``) sleeps for 120 s, longer than the flow's 60 s deadline, so only the
interruption can end the task with this error: without it the Lambda emulator's 11 s limit would crash the call and
the gateway backstop would later fail the task with ``task timed out`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.client import GatewayClient
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
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

    # x-sump checkpointed the input envelope under failed/ (P-SUMP-4), reason HandlerTimeout
    s3 = timeout_mesh.clients.s3
    bucket = timeout_mesh.resources.bucket

    def sumped_checkpoints() -> list[dict[str, object]]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="failed/").get("Contents", [])]
        bodies = [json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read()) for key in keys]
        return [b for b in bodies if b.get("id") == task_id]

    # x-sump runs after the layer's final status write, so the checkpoint may land after SSE showed the end
    [sumped] = wait_for(sumped_checkpoints, "x-sump's checkpoint")
    assert sumped["status"]["reason"] == "HandlerTimeout"
    assert sumped["payload"]["original_payload"] == {"text": "x", "prepared": True}
