"""The console's task list follows its unfinished rows over one multiplexed stream (GW-SSE (R3), docs/http.md
GW-SSE-20..27), instead of reading the list every 2 s: with every list read after the first refused, a running task's
row still turns ``succeeded``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.pages import Console

pytestmark = pytest.mark.browser


def test_gw_sse_23_task_list_rows_update_over_the_multiplexed_stream(page: Any, console: Console, gate: Path) -> None:
    task_id = console.create("slow", {"topic": "stream", "seconds": 25, "gate": str(gate)})
    lists: list[str] = []
    streams: list[str] = []

    def only_the_first_list(route: Any) -> None:
        lists.append(route.request.url)
        if len(lists) == 1:
            route.continue_()
        else:
            route.abort()

    page.route("**/api/v1/mesh/?*", only_the_first_list)
    page.on(
        "request", lambda request: streams.append(request.url) if "/api/v1/mesh/events?ids=" in request.url else None
    )
    page.goto(console.url + "#/tasks")
    row = page.locator(f'[data-task-row="{task_id}"]')
    row.wait_for()
    # the first (and only answered) list read the task unfinished: linger holds it until the gate opens
    assert row.locator(".badge[data-status=succeeded]").count() == 0
    gate.touch()
    row.locator(".badge[data-status=succeeded]").wait_for(timeout=60_000)
    assert any(task_id in url for url in streams), streams
    # the row changed although no list read after the first was answered: the stream redrew it
    assert row.locator("td").first.text_content()
