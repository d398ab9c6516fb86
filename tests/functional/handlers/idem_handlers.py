"""Handlers for the duplicate-delivery tests (P-ACK-7, P-ACK-8), loaded through ASYA_CODE_DIR.

``GATES`` lets a test hold calls of :func:`gated` inside the handler: each call takes the next queued :class:`Gate`
(none queued: it does not wait), says it entered, and waits until the test releases it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any


class Gate:
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


GATES: queue.Queue[Gate] = queue.Queue()
CALLS: list[Any] = []


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    CALLS.append(payload)
    return {**payload, "seen": True}


def split(payload: dict[str, Any]) -> Iterator[Any]:
    for index, word in enumerate(str(payload["text"]).split()):
        yield {"chunk": index, "word": word}


def boom(payload: Any) -> None:
    CALLS.append(payload)
    raise ValueError("model returned no text")


def nothing(payload: Any) -> None:
    return None


def end_route(payload: Any) -> Iterator[Any]:
    yield ("SET", ".route.next", [])
    yield {"final": payload}


def gated(payload: dict[str, Any]) -> dict[str, Any]:
    """One frame, after waiting at the next queued gate (up to 30 s)."""
    try:
        gate = GATES.get_nowait()
    except queue.Empty:
        gate = None
    if gate is not None:
        gate.entered.set()
        gate.release.wait(30)
    CALLS.append(payload)
    return {**payload, "gated": True}


def split_then_fail(payload: dict[str, Any]) -> Iterator[Any]:
    """Two frames on the first call; every later call raises before yielding (a handler that acts differently on a
    redelivery, as a transient error makes it)."""
    CALLS.append(payload)
    if len(CALLS) > 1:
        raise ConnectionError("model endpoint unreachable")
    yield {"chunk": 0}
    yield {"chunk": 1, "unlucky": True}
