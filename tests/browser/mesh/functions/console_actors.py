"""Actors of the browser tests' mesh: ``draft`` streams its text as FLY values, ``review`` fails on request, ``linger``
holds a task so it can be watched or canceled while it runs, ``ask`` asks for an approval (x-pause comes next),
``split`` fans out one payload per line, ``wobble`` fails its first call for each topic with a ``ConnectionError``
(retried by its policy) and passes on the second; given ``gate``, its first call waits for the gate before it fails.

``linger`` holds its task ``seconds`` (default 4) or, given ``gate`` (a file path), until the test creates that file
(at most ``seconds``): a test releases the task when it has seen it running, however slow the box is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Topics ``wobble`` has failed once (one process runs every poller locally).
_WOBBLED: set[str] = set()


class ReviewRejectedError(ValueError):
    """Raised by ``review`` when the payload asks it to fail."""


def draft(payload: dict[str, Any]) -> Iterator[Any]:
    topic = str(payload["topic"])
    words = [topic, *(f"word{index}" for index in range(1, int(payload.get("words", 4))))]
    for index, word in enumerate(words):
        time.sleep(0.15)  # a person watching the page sees the text grow
        yield "FLY", word if index == 0 else f" {word}"
    yield {**payload, "draft": " ".join(words)}


def review(payload: dict[str, Any]) -> dict[str, Any]:
    if payload.get("fail"):
        raise ReviewRejectedError(f"rejected draft about {payload.get('topic')!s}")
    return {**payload, "reviewed": True}


def ask(payload: dict[str, Any]) -> Iterator[Any]:
    """The pause metadata x-pause shows next (P-PAUSE-3): one required boolean field; the payload gains the draft the
    reviewer approves, so the page must show the state at the pause, not the input (GW-TASK-10)."""
    yield (
        "SET",
        ".headers.x-asya-pause",
        {
            "prompt": f"Approve the text about {payload.get('topic')!s}?",
            "fields": [
                {"name": "approved", "type": "boolean", "required": True, "prompt": "Approve it"},
            ],
        },
    )
    yield {**payload, "draft": f"The text about {payload.get('topic')!s}."}


def linger(payload: dict[str, Any]) -> dict[str, Any]:
    _wait_for_gate(payload, seconds=float(payload.get("seconds", 4)))
    return payload


def _wait_for_gate(payload: dict[str, Any], *, seconds: float) -> None:
    """``seconds``, or less once the file ``payload["gate"]`` exists."""
    deadline = time.monotonic() + seconds
    gate = payload.get("gate")
    while time.monotonic() < deadline and not (gate and Path(str(gate)).exists()):
        time.sleep(0.05)


def split(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for line in str(payload.get("text", "")).splitlines():
        yield {"topic": line}


def wobble(payload: dict[str, Any]) -> dict[str, Any]:
    topic = str(payload.get("topic"))
    if topic not in _WOBBLED:
        _WOBBLED.add(topic)
        if payload.get("gate"):  # the test releases the failure once its page follows the task
            _wait_for_gate(payload, seconds=25)
        raise ConnectionError(f"flaky upstream for {topic}")
    return {**payload, "wobbled": True}
