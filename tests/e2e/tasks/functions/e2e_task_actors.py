"""Actors of the e2e task-commands mesh (tests/e2e/tasks/asya.yaml)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from asya import TaskCanceledError


def nap(payload: dict[str, Any]) -> dict[str, Any]:
    """``seconds`` of rest; given ``gate`` (a file path), less once the test has created that file."""
    until = time.monotonic() + float(payload.get("seconds", 0))
    gate = payload.get("gate")
    while time.monotonic() < until and not (gate and Path(str(gate)).exists()):
        time.sleep(0.05)
    return {**payload, "rested": True}


def tag(payload: dict[str, Any]) -> Iterator[Any]:
    """Passes the payload on with the ``retry_of`` header it got (``asya retry`` links the new task there)."""
    headers = yield "GET", ".headers"
    yield {**payload, "retry_of": (headers or {}).get("retry_of")}


def explode(payload: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"boom on {payload.get('n')}")


def fan(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for index in range(int(payload["parts"])):
        yield {"part": index}


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "echoed": True}


def drip(payload: dict[str, Any]) -> Iterator[Any]:
    """Works in small steps for up to 15 s (under the 20 s actor timeout), yielding between them; writes to the file
    ``payload["marker"]`` when it started and how it ended (P-CANCEL (R3))."""
    marker = Path(payload["marker"])
    marker.write_text("started")
    try:
        for _ in range(150):
            time.sleep(0.1)
            yield None
    except TaskCanceledError:
        marker.write_text("cleaned up")
        raise
    marker.write_text("ran to its end")
    yield {**payload, "dripped": True}


#: Calls of ``picky`` per envelope id: a child's first call fails.
PICKY_CALLS: Counter[str] = Counter()


def brood(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Frame 0 (the task's own lineage) and one child per further part, each with the payload's other fields."""
    for index in range(int(payload["parts"])):
        yield {**payload, "part": index}


def picky(payload: dict[str, Any]) -> Iterator[Any]:
    """Part 1 fails once with a transient error (retried), part 2 fails for good, others pass."""
    envelope_id = yield "GET", ".id"
    PICKY_CALLS[envelope_id] += 1
    if payload["part"] == 1 and PICKY_CALLS[envelope_id] == 1:
        raise ConnectionError("upstream blinked")
    if payload["part"] == 2:
        raise ValueError("part 2 is malformed")
    yield payload


def gate(payload: dict[str, Any]) -> Iterator[Any]:
    """The task's own lineage (part 0) waits, at most 50 s, until its view's child tree shows a retrying and a failed
    child (read at ``payload["view_url"]``), so the task ends with both in the tree; children pass at once."""
    task_id = yield "GET", ".id"
    if payload.get("part") == 0:
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline:
            view = httpx.get(f"{payload['view_url']}/api/v1/mesh/{task_id}", timeout=5).json()
            if {"retrying", "failed"} <= {child["status"] for child in view.get("children") or []}:
                break
            time.sleep(0.2)
    yield payload
