"""Handlers for the hop-claim guarantee tests (P-ACK-7, P-ACK-8), loaded through ASYA_CODE_DIR.

Every handler appends what it saw to ``CALLS`` (the test clears it), so a test can say how many times a hop's handler
ran. ``GATES`` holds calls of :func:`gated` inside the handler: each call takes the next queued :class:`Gate` (none
queued: it does not wait), says it entered, and waits until the test releases it.
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


class Crash(BaseException):
    """Stands for the invocation dying (out of memory, Lambda timeout): a ``BaseException`` the layer never catches
    (P-ACK-5)."""


GATES: queue.Queue[Gate] = queue.Queue()
CALLS: list[Any] = []
CRASH_NEXT: list[bool] = []


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    CALLS.append(payload)
    if CRASH_NEXT and CRASH_NEXT.pop():
        raise Crash("invocation died before sending")
    return {**payload, "seen": True}


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


def boom(payload: Any) -> None:
    CALLS.append(payload)
    raise ValueError("model returned no text")


def fan_out(payload: dict[str, Any]) -> Iterator[Any]:
    """Frame 0 first, then two children."""
    CALLS.append(payload)
    yield {"part": 0}
    yield {"part": 1}
    yield {"part": 2}


def fail_after_frames(payload: dict[str, Any]) -> Iterator[Any]:
    """Two frames, then an error (a partial failure, P-RES-10)."""
    CALLS.append(payload)
    yield {"part": 0}
    yield {"part": 1}
    raise RuntimeError("lost the model midway")
