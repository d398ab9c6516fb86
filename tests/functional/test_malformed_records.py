"""Malformed SQS records (issue 18 "Build" 2): binary, huge, wrongly typed and legacy-shaped bodies each reach x-sump
as ``ParseError`` with a reason that names the member and the bad value, short enough to read (P-ENV-9..12, P-ENV-14,
P-ERR-4), and never fail the batch (P-ACK-3): the well-formed record next to them goes on."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.functional.actors import NOW, Harness, envelope

pytestmark = pytest.mark.functional

#: The longest x-sump reason message the layer writes for a refused body.
MAX_REASON = 1024


@pytest.fixture
def clock() -> Iterator[Callable[[], datetime]]:
    yield lambda: NOW


@pytest.fixture
def h(mesh: Any, clock: Callable[[], datetime]) -> Harness:
    return Harness(mesh, "echo", clock=clock)


def _with(**members: Any) -> dict[str, Any]:
    env = envelope("t-bad")
    env.update(members)
    return env


def _without(member: str) -> dict[str, Any]:
    env = envelope("t-bad")
    del env[member]
    return env


HUGE = "x" * 200_000

CASES: list[tuple[str, str | dict[str, Any], str]] = [
    ("binary", base64.b64encode(bytes(range(256))).decode(), "body is not JSON: Expecting value at position 0"),
    ("latin1 bytes", bytes(range(128, 256)).decode("latin-1"), "body is not JSON: Expecting value at position 0"),
    ("array", "[1, 2]", "envelope must be a JSON object, got list"),
    ("string", '"hello"', "envelope must be a JSON object, got str"),
    ("NaN", '{"id": "t", "payload": NaN}', "body is not JSON: NaN is not a JSON value"),
    ("id int", _with(id=5), "envelope id must be a non-empty string, got 5"),
    ("id empty", _with(id=""), "envelope id must be a non-empty string, got ''"),
    ("route list", _with(route=["a"]), "envelope route must be an object, got ['a']"),
    ("route curr int", _with(route={"prev": [], "curr": 3, "next": []}), "route.curr must be a string, got 3"),
    (
        "route next str",
        _with(route={"curr": "normalize", "next": "b"}),
        "route.next must be an array of strings, got 'b'",
    ),
    ("no payload", _without("payload"), "envelope has no 'payload' member (it is required, null is allowed)"),
    ("headers str", _with(headers="h"), "envelope headers must be an object, got str"),
    ("status list", _with(status=[1]), "envelope status must be an object, got list"),
    ("parent_id int", _with(parent_id=7), "envelope parent_id must be a string, got 7"),
    (
        "legacy current str",
        _with(route={"actors": ["normalize"], "current": "0"}),
        "legacy route.current must be a non-negative integer, got '0'",
    ),
    (
        "legacy actors mixed",
        _with(route={"actors": ["normalize", 1], "current": 0}),
        "legacy route.actors must be an array of strings, got ['normalize', 1]",
    ),
    ("huge id", _with(id="i" * 100_000), "envelope id is 100000 characters, over the limit of"),
    (
        "huge route",
        _with(route={"curr": "normalize", "next": HUGE}),
        "route.next must be an array of strings, got 'xxx",
    ),
    ("huge junk", HUGE, "body is not JSON: Expecting value at position 0"),
]


@pytest.mark.parametrize(("body", "reason"), [(body, reason) for _, body, reason in CASES], ids=[c[0] for c in CASES])
def test_malformed_record_reaches_x_sump_with_a_clear_reason_p_env_9_p_err_4(
    h: Harness, body: str | dict[str, Any], reason: str
) -> None:
    _, failed = h.run(body, envelope("t-fine"))
    assert failed == [], "a malformed record never fails the batch (P-ACK-3)"
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "ParseError"
    message = sump["payload"]["details"]["message"]
    assert message.startswith(reason)
    assert len(message) <= MAX_REASON, f"the reason is {len(message)} characters"
    assert sump["payload"]["error"] == f"ParseError: {message}"
    assert [out["id"] for out in h.drain("analyze")] == ["t-fine"]


def test_legacy_route_is_still_accepted_p_env_14(h: Harness) -> None:
    legacy = _with(route={"actors": ["x", "normalize", "analyze"], "current": 1})
    _, failed = h.run(legacy)
    assert failed == []
    [out] = h.drain("analyze")
    assert out["route"] == {"prev": ["x", "normalize"], "curr": "analyze", "next": []}
    assert h.drain("x-sump") == []


def test_huge_malformed_body_keeps_a_bounded_raw_body_p_err_4(h: Harness) -> None:
    body = json.dumps(_with(route={"curr": "normalize", "next": HUGE}))
    _, failed = h.run(body)
    assert failed == []
    [sump] = h.drain("x-sump")
    raw = sump["payload"]["details"]["raw_body"]
    assert 0 < len(raw.encode()) <= 64 * 1024
    assert body.startswith(raw[:1000])
