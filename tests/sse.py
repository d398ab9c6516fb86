"""Reading a gateway's SSE stream in tests, frame by frame as it arrives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx


def frames(response: httpx.Response, *, numeric_ids: bool = True) -> Iterator[dict[str, Any]]:
    """Parse SSE frames as they arrive: ``{"retry"?, "id"?, "event", "data"}`` or ``{"comment": text}``. ``id`` is an
    int for a one-task stream (GW-SSE-5); ``numeric_ids=False`` keeps it text (the many-task stream's cursor map,
    GW-SSE (R3))."""
    numbers = ("id", "retry") if numeric_ids else ("retry",)
    frame: dict[str, Any] = {}
    for line in response.iter_lines():
        if line == "":
            if frame:
                yield frame
            frame = {}
        elif line.startswith(":"):
            yield {"comment": line[1:]}
        else:
            name, _, value = line.partition(": ")
            frame[name] = json.loads(value) if name == "data" else int(value) if name in numbers else value
    assert frame == {}, "stream ended inside a frame"
