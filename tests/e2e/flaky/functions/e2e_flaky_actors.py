"""Actors of the e2e retry mesh: ``prepare`` passes the payload on, ``flaky`` fails twice per task, then succeeds;
``doomed`` always fails and ``fallback`` turns the error payload it is handed (P-RES-14) into a result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

#: Calls of ``flaky`` per task id; the test reads it to see how often the handler really ran.
CALLS: Counter[str] = Counter()


class UpstreamDownError(ConnectionError):
    """The transient error ``flaky`` raises."""


def prepare(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "prepared": True}


def flaky(payload: dict[str, Any]) -> Iterator[Any]:
    task = yield ("GET", ".id")
    CALLS[task] += 1
    if CALLS[task] <= 2:
        raise UpstreamDownError(f"upstream down (call {CALLS[task]})")
    yield {**payload, "calls": CALLS[task]}


def doomed(payload: dict[str, Any]) -> dict[str, Any]:
    raise UpstreamDownError(f"no way to handle {payload.get('text')!r}")


def fallback(payload: dict[str, Any]) -> dict[str, Any]:
    return {"recovered": payload["original_payload"], "cause": payload["error"]}
