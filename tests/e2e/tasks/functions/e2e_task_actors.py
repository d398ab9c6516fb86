"""Actors of the e2e task-commands mesh (tests/e2e/tasks/asya.yaml)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asya import TaskCanceledError


def nap(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(payload.get("seconds", 0)))
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
