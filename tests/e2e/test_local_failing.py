"""A handler error ends the task ``failed`` with the error, the failing actor and a checkpoint (P-ERR-1, P-ERR-3,
P-RES-11, P-RES-14, P-SINK-5, P-CKPT-1)."""

from __future__ import annotations

from typing import Any

import pytest

from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.checkpoints import task_checkpoint

pytestmark = pytest.mark.e2e


def test_handler_error_fails_the_task_with_the_error(failing_mesh: LocalMesh, failing_gateway: Any) -> None:
    task_id = failing_gateway.create(flow="doomed", payload={"text": "fragile"})
    events = failing_gateway.follow(task_id)
    assert terminal_status(events[-1]) == "failed"

    task = failing_gateway.get(task_id)
    assert task["status"] == "failed"
    assert task["error"] == "kaboom on 'fragile'"
    assert task["failed_actor"] == "explode"
    assert task["error_details"]["type"] == "e2e_failing_actors.KaboomError"
    assert task["error_details"]["mro"][:2] == ["ValueError", "Exception"]
    assert "result" not in task

    key = task["checkpoint_key"]
    assert key.startswith("failed/")
    # P-RES-14: the error payload keeps the input
    payload = task_checkpoint(failing_mesh.clients.s3, failing_mesh.resources.bucket, task)["payload"]
    assert payload["original_payload"] == {"text": "fragile", "prepared": True}
    assert payload["error"] == "e2e_failing_actors.KaboomError: kaboom on 'fragile'"
