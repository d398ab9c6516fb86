"""Handlers of the flow fault tests: a payload nested deeper than a continuation can copy, and an actor that returns
two payloads inside a flow (P-FLOW-11)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_CALLS: list[str] = []


def calls() -> list[str]:
    """The handlers called so far in this process, in order (the tests' window on re-runs)."""
    return _CALLS


def deep(payload: dict[str, Any]) -> dict[str, Any]:
    """Nests a list 400 levels deep, which the layer still sends."""
    _CALLS.append("deep")
    nest: Any = []
    for _ in range(400):
        nest = [nest]
    return {**payload, "nest": nest}


def inc(payload: dict[str, Any]) -> dict[str, Any]:
    _CALLS.append("inc")
    return {**payload, "n": int(payload.get("n", 0)) + 1}


def two(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    _CALLS.append("two")
    yield payload
    yield {**payload, "second": True}
