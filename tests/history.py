"""Reading a task's run history in tests: the mesh records it in S3 (P-HIST-10) and the gateway serves it
(``GET /api/v1/mesh/{id}/history``). An invocation writes its lines when its batch ends, which may be after the task's
terminal status, so a test reads until no object of the task's chain is missing (a bound, not a timing assertion)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from tests.waiting import wait_for


def recorded_history(
    url: str,
    task_id: str,
    *,
    headers: Mapping[str, str] | None = None,
    until: Callable[[list[dict[str, Any]]], bool] = bool,
) -> dict[str, Any]:
    """The run history of ``task_id`` once every invocation of its chain has written its lines and ``until(steps)``
    holds (a fan-out's children may run on after the task's own chain ended it, P-FAN-6)."""

    def read() -> dict[str, Any] | None:
        answer = httpx.get(f"{url}/api/v1/mesh/{quote(task_id, safe='')}/history", headers=headers, timeout=10)
        if answer.status_code != 200:
            return None
        body: dict[str, Any] = answer.json()
        return body if body["missing_objects"] == 0 and until(body["steps"]) else None

    found: dict[str, Any] = wait_for(read, f"the run history of task {task_id}")
    return found
