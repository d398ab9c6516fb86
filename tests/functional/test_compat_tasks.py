"""Task records across releases (docs/protocol.md section 8.1): the current store reads the task items release 1 wrote
(tests/compat/r1/goldens/tasks.json, as DynamoDB held them) into the same task views."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.functional

GOLDENS = Path(__file__).resolve().parents[1] / "compat" / "r1" / "goldens"
R1_TASKS: dict[str, Any] = json.loads((GOLDENS / "tasks.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(R1_TASKS))
def test_the_current_store_reads_a_release_1_task_item_as_release_1_did(mesh: Any, name: str) -> None:
    golden = R1_TASKS[name]
    for item in golden["items"]:
        mesh.aws.dynamodb.put_item(TableName=mesh.resources.table, Item=item)
    store = mesh.store(lambda: datetime(2026, 12, 7, 10, 0, 1, tzinfo=UTC))
    assert store.get_task(golden["id"], enforce_deadline=False) == golden["view"]


def test_the_goldens_hold_every_phase() -> None:
    assert {golden["view"]["status"] for golden in R1_TASKS.values()} == {
        "pending", "running", "succeeded", "failed", "paused"}  # fmt: skip


def test_release_1_reads_every_task_item_the_current_code_writes(mesh: Any) -> None:
    """P-COMPAT-1, the other direction: what the current store writes in each phase is read by release 1's frozen
    task-item reader without a refusal, into the view the current store shows (less the state stored at a pause,
    which is no item)."""
    from tests.compat.r1.taskitem import read_task
    from tests.compat.writers import task_records

    store = mesh.store(lambda: datetime(2026, 12, 7, 10, 0, 0, 250000, tzinfo=UTC))
    ids = task_records(store)
    items = mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"]
    for name, task_id in ids.items():
        mine = [item for item in items if item["pk"] == {"S": f"TASK#{task_id}"}]
        now = store.get_task(task_id, enforce_deadline=False)
        assert now is not None
        now.pop("paused_state", None)
        assert read_task(mine, bucket=mesh.resources.bucket) == now, name
