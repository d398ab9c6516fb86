"""Handlers loaded by tests/unit/test_abi_load.py through ``load_handler(..., code_dir=<this directory>)``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

NOT_CALLABLE = 42


def echo(payload: Any) -> Any:
    return payload


def with_default(payload: Any, extra: int = 1) -> Any:
    return {"payload": payload, "extra": extra}


def two_args(payload: Any, other: Any) -> Any:
    return payload


def no_args() -> None:
    return None


def keyword_only(*, payload: Any) -> Any:
    return payload


async def async_echo(payload: Any) -> Any:
    return payload


def gen_echo(payload: Any) -> Iterator[Any]:
    yield payload


async def agen_echo(payload: Any) -> AsyncIterator[Any]:
    yield payload


class Counter:
    """Counts instances (P-ABI-3) and calls per instance."""

    instances = 0

    def __init__(self, start: int = 0) -> None:
        type(self).instances += 1
        self.calls = start

    def process(self, payload: Any) -> dict[str, Any]:
        self.calls += 1
        return {"calls": self.calls, "instance": id(self)}

    async def process_async(self, payload: Any) -> Any:
        return payload

    def stream(self, payload: Any) -> Iterator[Any]:
        yield payload

    @staticmethod
    def static(payload: Any) -> Any:
        return payload

    label = "not callable"

    class Inner:
        pass


class NeedsArgs:
    def __init__(self, model_path: str) -> None:
        self.model_path = model_path

    def process(self, payload: Any) -> Any:
        return payload


class BrokenInit:
    def __init__(self) -> None:
        raise RuntimeError("model file missing")

    def process(self, payload: Any) -> Any:
        return payload
