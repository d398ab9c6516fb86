"""Handlers whose output UTF-8 JSON cannot carry (P-ABI-19 R3, issue 25 defects 2 and 6)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def huge_int(payload: Any) -> Any:
    return {"x": 10**5000}


def surrogate_yield(payload: Any) -> Iterator[Any]:
    yield {"x": "a\ud800b"}


def surrogate_header(payload: Any) -> Iterator[Any]:
    yield ("SET", ".headers.note", "a\udc00")
    yield payload


def surrogate_fly(payload: Any) -> Iterator[Any]:
    yield ("FLY", {"partial": "a\ud800"})
    yield payload


def colliding_keys(payload: Any) -> Any:
    return {1: "a", "1": "b"}


def returns_generator(payload: Any) -> Any:
    def words() -> Iterator[str]:
        yield "a"
        yield "b"

    return words()


def second_yield_unencodable(payload: Any) -> Iterator[Any]:
    yield {"ok": 1}
    yield {"x": 10**5000}
