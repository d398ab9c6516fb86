"""How the CLI follows a task's children (docs/http.md GW-TASK-9 (R3)): retries and failures labelled with the
child, from the view's child tree, at most one view read per interval."""

from __future__ import annotations

from typing import Any

import pytest

from asya_local.childwatch import ChildWatch, child_line

pytestmark = pytest.mark.unit


def _child(cid: str, status: str, attempt: int = 1, error: str | None = None) -> dict[str, Any]:
    return {"id": cid, "status": status, "current_actor": "price", "attempt": attempt, "error": error}


def test_gw_task_9_retries_and_failures_are_announced_once_each_labelled_with_the_child() -> None:
    said: list[str] = []
    watch = ChildWatch(lambda: {}, said.append)
    watch.update({"children": [_child("c1", "running"), _child("c2", "running")]})
    watch.update({"children": [_child("c1", "retrying", 2, "TimeoutError: slow"), _child("c2", "running")]})
    watch.update({"children": [_child("c1", "retrying", 2, "TimeoutError: slow"), _child("c2", "succeeded")]})
    watch.update({"children": [_child("c1", "failed", 2, "slow"), _child("c2", "succeeded")]})
    assert said == [
        "child c1: retrying attempt 2 at price: TimeoutError: slow",
        "child c1: failed at price: slow",
    ]
    assert watch.summary() == "children: 1 failed, 1 succeeded"


def test_gw_task_9_one_view_read_per_interval() -> None:
    now, reads = [0.0], []

    def read() -> dict[str, Any]:
        reads.append(now[0])
        return {"children": [_child("c1", "running")]}

    watch = ChildWatch(read, lambda _: None, interval=2.0, monotonic=lambda: now[0])
    for step in range(10):
        now[0] = step * 0.5
        watch.poll()
    assert reads == [0.0, 2.0, 4.0]
    assert watch.summary() == "children: 1 still running"


def test_gw_task_9_no_children_no_lines() -> None:
    watch = ChildWatch(lambda: {}, lambda _: None)
    watch.update({"id": "t"})
    assert watch.summary() is None
    assert child_line(_child("c", "succeeded")) is None
