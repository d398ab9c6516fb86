"""Task items across releases (docs/protocol.md P-COMPAT-1): release 1's frozen task-item reader
(tests/compat/r1/taskitem.py) reads release 1's goldens into the views release 1 showed, and refuses what release 1
could not read as its writer meant, so the check that the current writer writes nothing it refuses
(tests/functional/test_compat_tasks.py) can fail."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat.r1.taskitem import TaskItemError, read_task

pytestmark = pytest.mark.unit

GOLDENS = Path(__file__).resolve().parents[1] / "compat" / "r1" / "goldens"
R1_TASKS: dict[str, Any] = json.loads((GOLDENS / "tasks.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(R1_TASKS))
def test_the_frozen_reader_reads_a_release_1_golden_into_its_view(name: str) -> None:
    golden = R1_TASKS[name]
    assert read_task(golden["items"]) == golden["view"]


def _task_item(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items = copy.deepcopy(R1_TASKS[name]["items"])
    return items, next(item for item in items if item["sk"] == {"S": "TASK"})


@pytest.mark.parametrize(
    ("attribute", "value", "refusal"),
    [
        ("status", {"S": "suspended"}, "status 'suspended' is none of"),
        ("status", {"N": "1"}, "attribute 'status' must be of type S"),
        ("last_seq", {"N": "two"}, "attribute 'last_seq' is not a number"),
        ("progress_percent", {"S": "50"}, "attribute 'progress_percent' must be of type N"),
        ("data", {"S": "{not json"}, "attribute 'data' is not JSON"),
        ("data", {"S": "[1, 2]"}, "attribute 'data' must be a JSON object"),
        ("payload", {"S": "{not json"}, "attribute 'payload' is not JSON"),
    ],
)
def test_the_frozen_reader_refuses_what_release_1_cannot_read(attribute: str, value: Any, refusal: str) -> None:
    items, task = _task_item("running")
    task[attribute] = value
    with pytest.raises(TaskItemError, match=refusal):
        read_task(items)


def test_an_unknown_attribute_and_a_null_are_read_as_release_1_read_them() -> None:
    """A new attribute is a compatible change (P-COMPAT-2): release 1 never reads it."""
    items, task = _task_item("running")
    task["priority"] = {"N": "5"}
    task["step"] = {"NULL": True}
    assert read_task(items) == R1_TASKS["running"]["view"]


def test_no_task_item_reads_as_no_task() -> None:
    items, _ = _task_item("failed")
    assert read_task([item for item in items if item["sk"] != {"S": "TASK"}]) is None
