"""Handlers of the fan-in tests (PROTOCOL section 7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def fan(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield ``payload["n"]`` frames ``{"i": i}``; with ``"fail"`` raise after the first frame."""
    for index in range(int(payload["n"])):
        yield {"i": index, "fail_at": payload.get("fail_at", -1), "pad": "x" * int(payload.get("pad", 0))}
        if payload.get("fail"):
            raise RuntimeError("boom after a frame")


def square(payload: dict[str, Any]) -> dict[str, Any]:
    """One slice's work; a payload with ``"fail_at" == i`` raises."""
    if payload.get("i") == payload.get("fail_at", -1):
        raise ValueError(f"slice {payload['i']} failed")
    return {"i": payload["i"], "sq": payload["i"] ** 2, "pad": payload.get("pad", "")}


def total(payload: dict[str, Any]) -> dict[str, Any]:
    """After the merge: the sum of the squares, proving the merged payload arrived."""
    return {"n": len(payload["squares"]), "sum": sum(s["sq"] for s in payload["squares"])}
