"""A status filter finds what its count counts (GATEWAY GW-LIST-3 (R3); issue 25, defect 7).

``GET /api/v1/mesh/?status=paused&count=true&limit=5`` answered ``messages: []`` with ``total: 1``: the filter was
applied to the ``limit + 1`` newest index entries only, so a paused task older than them was counted but never
listed, at any limit. These tests put paused tasks among many newer ones and list them at several limits.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya.store import Outcome, TaskStore
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


@pytest.fixture
def store(mesh: Any) -> TaskStore:
    clock = ManualClock(START)
    # every task is made on one day: the window is that day and an empty one before it, so a walk that runs out
    # still walks past a day without entries (the default 30 days would query 8 shards of 29 more empty days)
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=clock, list_window_days=1)
    for i in range(130):
        store.create_task(task_id=f"t{i:03d}", actor="normalize", flow="text-pipeline")
        if i in (2, 40):
            paused = store.pause(
                f"t{i:03d}", actor="x-pause", pause_metadata={"prompt": "ok?"}, remaining_seconds=60, claim=(1, 1, 0)
            )
            assert paused.outcome is Outcome.ACCEPTED
        clock.now += timedelta(seconds=1)
    return store


def _all_pages(store: TaskStore, **query: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(50):
        page = store.list_tasks(**query, cursor=cursor)
        ids += [m["id"] for m in page["messages"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError("the listing never ended")


@pytest.mark.parametrize("limit", [1, 5, 100])
def test_gw_list_3_r3_a_status_filter_lists_the_paused_tasks_it_counts(store: TaskStore, limit: int) -> None:
    page = store.list_tasks(status="paused", count=True, limit=limit)
    assert page["total"] == 2
    assert [m["id"] for m in page["messages"]] == ["t040", "t002"][:limit]
    assert all(m["status"] == "paused" for m in page["messages"])
    assert _all_pages(store, status="paused", limit=limit) == ["t040", "t002"]


def test_gw_list_3_r3_offset_counts_matching_tasks(store: TaskStore) -> None:
    page = store.list_tasks(status="paused", offset=1, limit=5, count=True)
    assert [m["id"] for m in page["messages"]] == ["t002"] and page["total"] == 2
    pending = store.list_tasks(status="pending", count=True, limit=100)
    assert pending["total"] == 128 and len(pending["messages"]) == 100
    expected = [f"t{i:03d}" for i in range(129, -1, -1) if i not in (2, 40)]
    assert _all_pages(store, status="pending", limit=100) == expected
