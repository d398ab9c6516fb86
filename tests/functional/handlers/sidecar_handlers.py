"""Small user handlers for the sidecar functional tests (loaded through ASYA_CODE_DIR, P-ABI-1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """One frame: the payload plus a marker."""
    return {**payload, "seen": True}


def nothing(payload: Any) -> None:
    """Zero frames, after mutating the input in place (the x-sink envelope must carry the input as received)."""
    if isinstance(payload, dict):
        payload["mutated"] = True


def boom(payload: Any) -> Any:
    """A handler error with no retry policy (P-RES-11)."""
    raise ValueError(f"cannot handle {payload!r}")


def split(payload: dict[str, Any]) -> Iterator[Any]:
    """Fan-out: one frame per word (P-FAN-1)."""
    for index, word in enumerate(str(payload["text"]).split()):
        yield {"chunk": index, "word": word}


def stream_fly(payload: dict[str, Any]) -> Iterator[Any]:
    """Two FLY values, then one frame."""
    yield ("FLY", {"partial": 1})
    yield ("FLY", {"partial": 2})
    yield {**payload, "done": True}


def to_ghost(payload: dict[str, Any]) -> Iterator[Any]:
    """Frame 0 to an actor without a queue (P-ROUTE-8), frame 1 along the normal route."""
    yield ("SET", ".route.next", ["ghost"])
    yield {"to": "ghost"}
    yield ("SET", ".route.next", ["analyze"])
    yield {"to": "analyze"}


def not_json(payload: Any) -> float:
    """An unserialisable frame (P-ABI-19 R3): the handler's SerializationError."""
    return float("nan")


def end_route(payload: Any) -> Iterator[Any]:
    """Clears route.next: the frame's route ends here (P-ROUTE-4)."""
    yield ("SET", ".route.next", [])
    yield {"final": payload}


class NeedsArgs:
    """Cannot be instantiated without arguments: HandlerLoadError (P-ABI-3)."""

    def __init__(self, required: int) -> None:
        self.required = required

    def process(self, payload: Any) -> Any:
        return payload


def child_to_ghost(payload: dict[str, Any]) -> Iterator[Any]:
    """Frame 0 along the normal route, frame 1 (a child) to an actor without a queue."""
    yield {"to": "analyze"}
    yield ("SET", ".route.next", ["ghost"])
    yield {"to": "ghost"}
