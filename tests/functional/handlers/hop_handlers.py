"""Handlers of the hop-ceiling tests (P-HOP-1 (R3))."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def again(payload: Any) -> Iterator[Any]:
    """A runaway loop: every call sends its payload back to its own actor."""
    yield ("SET", ".route.next", ["normalize"])
    yield payload


def reset_hops(payload: Any) -> Iterator[Any]:
    """Tries to reset the hop count: refused at the yield (P-HDR-5), and the layer sets it on every send anyway
    (P-HDR-3)."""
    try:
        yield ("SET", ".headers.x-asya-hops", 0)
    except ValueError as exc:
        payload = {**payload, "refused": str(exc)}
    yield payload
