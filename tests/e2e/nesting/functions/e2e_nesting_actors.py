"""Actors of the e2e nesting mesh: both pass the payload on unchanged, one as a function, one as a generator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def echo(payload: Any) -> Any:
    return payload


def relay(payload: Any) -> Iterator[Any]:
    yield payload
