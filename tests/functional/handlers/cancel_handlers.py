"""Handlers for the cancel-at-yield tests (P-CANCEL (R3)), loaded through ASYA_CODE_DIR.

``AT_YIELD`` holds a callable the test sets: the generator calls it before its second yield (the test cancels the
task there and moves the layer's clock past the read interval). ``EVENTS`` records what the handler did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from asya import TaskCanceledError

EVENTS: list[str] = []
AT_YIELD: list[Callable[[], None]] = []


def worker(payload: Any) -> Iterator[Any]:
    """Yields nothing but ``None`` while it works; a cancel lands at a yield, where it cleans up."""
    try:
        for step in range(100):
            if step == 1 and AT_YIELD:
                AT_YIELD[0]()
            yield None
            EVENTS.append(f"step {step}")
        EVENTS.append("ran to its end")
        yield {"done": True}
    except TaskCanceledError:
        EVENTS.append("cleaned up")
        raise


def plain(payload: Any) -> dict[str, Any]:
    """A plain function runs to its end, canceled or not."""
    if AT_YIELD:
        AT_YIELD[0]()
    EVENTS.append("ran to its end")
    return {"done": True}
