"""Envelope parsing, validation, legacy conversion and re-serialisation (PROTOCOL section 1)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from asya.envelope import Envelope, Route, parse_envelope
from asya.exceptions import EnvelopeParseError

pytestmark = pytest.mark.unit

VALID: dict[str, Any] = {
    "id": "a1",
    "parent_id": "p0",
    "route": {"prev": ["prep"], "curr": "infer", "next": ["post"]},
    "headers": {"x-asya-flow": "f", "nested": {"k": [1, 2]}},
    "status": {
        "phase": "pending",
        "actor": "infer",
        "attempt": 2,
        "max_attempts": 3,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:02Z",
        "deadline_at": "2026-03-01T10:05:00Z",
        "error": {"message": "m", "type": "T"},
    },
    "payload": {"text": "hi"},
}


def _body(**changes: Any) -> str:
    raw = {**VALID, **changes}
    return json.dumps({k: v for k, v in raw.items() if v is not _DROP})


_DROP = object()


def test_p_env_2_valid_envelope_round_trips() -> None:
    """Also P-ENV-3: ``route.prev`` (oldest first), ``route.curr`` and ``route.next`` are read and written back as
    they are, all three members present."""
    env = parse_envelope(json.dumps(VALID))
    assert env.id == "a1"
    assert env.parent_id == "p0"
    assert env.route == Route(prev=["prep"], curr="infer", next=["post"])
    assert env.to_dict() == VALID
    assert json.loads(env.to_json()) == VALID


def test_p_env_2_bytes_and_dict_bodies_are_accepted() -> None:
    assert parse_envelope(json.dumps(VALID).encode()).id == "a1"
    assert parse_envelope(dict(VALID)).id == "a1"


def test_p_env_2_null_payload_is_allowed_and_empty_parent_id_is_absent() -> None:
    env = parse_envelope(_body(payload=None, parent_id=""))
    assert env.payload is None
    assert env.parent_id is None
    out = env.to_dict()
    assert "parent_id" not in out
    assert out["payload"] is None


def test_p_env_2_empty_headers_are_omitted_and_status_always_written() -> None:
    env = parse_envelope(_body(headers=_DROP, status=_DROP))
    out = env.to_dict()
    assert "headers" not in out
    assert out["status"] == {"phase": "pending", "attempt": 1, "max_attempts": 1}


def test_p_env_4_unknown_members_are_dropped_at_every_level() -> None:
    raw = {
        **VALID,
        "extra": 1,
        "route": {**VALID["route"], "junk": True},
        "status": {**VALID["status"], "mystery": "x"},
    }
    out = parse_envelope(json.dumps(raw)).to_dict()
    assert out == VALID


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        ("{not json", "not JSON"),
        ('{"id": "a", "payload": NaN, "route": {"prev": [], "curr": "a", "next": []}}', "NaN"),
        ("[1, 2]", "must be a JSON object, got list"),
        ('"text"', "must be a JSON object, got str"),
        ("null", "must be a JSON object, got NoneType"),
    ],
)
def test_p_env_9_not_json_or_not_an_object(body: str | bytes, match: str) -> None:
    with pytest.raises(EnvelopeParseError, match=match):
        parse_envelope(body)


@pytest.mark.parametrize(
    ("env_id", "match"),
    [(_DROP, "id must be a non-empty string"), (5, "got 5"), ("", "got ''"), ("x" * 257, "257 characters")],
)
def test_p_env_10_bad_id(env_id: object, match: str) -> None:
    with pytest.raises(EnvelopeParseError, match=match):
        parse_envelope(_body(id=env_id))


def test_p_env_10_id_of_256_characters_is_fine() -> None:
    assert parse_envelope(_body(id="x" * 256)).id == "x" * 256


@pytest.mark.parametrize(
    ("route", "match"),
    [
        (_DROP, "route must be an object"),
        ("a", "route must be an object"),
        ({}, "must have prev/curr/next"),
        ({"prev": "a", "curr": "b", "next": []}, "route.prev must be an array of strings"),
        ({"prev": [1], "curr": "b", "next": []}, "route.prev must be an array of strings"),
        ({"prev": [], "curr": 3, "next": []}, "route.curr must be a string"),
        ({"prev": [], "next": []}, "route.curr must be a string"),
        ({"prev": [], "curr": "b", "next": {"a": 1}}, "route.next must be an array of strings"),
        ({"actors": ["a"]}, "must have prev/curr/next"),
    ],
)
def test_p_env_11_malformed_route(route: object, match: str) -> None:
    with pytest.raises(EnvelopeParseError, match=match):
        parse_envelope(_body(route=route))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"payload": _DROP}, "no 'payload' member"),
        ({"headers": [1]}, "headers must be an object, got list"),
        ({"headers": "h"}, "headers must be an object, got str"),
        ({"status": "pending"}, "status must be an object, got str"),
        ({"parent_id": 7}, "parent_id must be a string"),
    ],
)
def test_p_env_12_payload_headers_status(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(EnvelopeParseError, match=match):
        parse_envelope(_body(**changes))


def test_p_env_12_status_members_of_the_wrong_type_are_rebuilt() -> None:
    status = {
        "phase": "bogus",
        "reason": 5,
        "actor": [],
        "attempt": 0,
        "max_attempts": True,
        "created_at": "not a time",
        "error": "flat string",
    }
    env = parse_envelope(_body(status=status))
    assert env.status is not None
    assert env.status.to_dict() == {"phase": "pending", "attempt": 1, "max_attempts": 1}


def test_p_env_13_unparseable_deadline_is_absent_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asya.envelope"):
        env = parse_envelope(_body(status={**VALID["status"], "deadline_at": "next tuesday"}))
    assert env.status is not None
    assert env.status.deadline_at is None
    assert "deadline_at" not in env.to_dict()["status"]
    assert any("next tuesday" in record.getMessage() for record in caplog.records)


def test_p_env_13_any_rfc3339_deadline_is_accepted() -> None:
    env = parse_envelope(_body(status={"deadline_at": "2026-03-01T12:05:00.250+02:00"}))
    assert env.status is not None
    assert env.status.deadline_at == "2026-03-01T12:05:00.250+02:00"


def test_p_env_15_spec_example_legacy_conversion() -> None:
    legacy = {"id": "a1", "route": {"actors": ["prep", "infer", "post"], "current": 1}, "payload": {"text": "hi"}}
    out = parse_envelope(json.dumps(legacy)).to_dict()
    assert out["route"] == {"prev": ["prep"], "curr": "infer", "next": ["post"]}
    assert "actors" not in out["route"], "legacy input is converted, never echoed (P-ENV-5)"


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (0, Route(prev=[], curr="a", next=["b", "c"])),
        (2, Route(prev=["a", "b"], curr="c", next=[])),
        (3, Route(prev=["a", "b", "c"], curr="", next=[])),
        (9, Route(prev=["a", "b", "c"], curr="", next=[])),
    ],
)
def test_p_env_15_legacy_conversion_bounds(current: int, expected: Route) -> None:
    env = parse_envelope(_body(route={"actors": ["a", "b", "c"], "current": current}))
    assert env.route == expected


@pytest.mark.parametrize("current", [-1, 1.5, "1", True, None])
def test_p_env_15_negative_or_non_integer_current_is_a_parse_error(current: object) -> None:
    with pytest.raises(EnvelopeParseError, match=r"legacy route\.current must be a non-negative integer"):
        parse_envelope(_body(route={"actors": ["a", "b"], "current": current}))


def test_p_env_15_legacy_actors_must_be_strings() -> None:
    with pytest.raises(EnvelopeParseError, match=r"legacy route\.actors"):
        parse_envelope(_body(route={"actors": ["a", 2], "current": 0}))


def test_p_env_14_new_members_win_when_both_shapes_are_present() -> None:
    both = {"actors": ["a", "b", "c"], "current": 0, "prev": ["z"], "curr": "y", "next": []}
    assert parse_envelope(_body(route=both)).route == Route(prev=["z"], curr="y", next=[])


def test_p_env_14_legacy_without_curr_is_converted_and_new_members_override() -> None:
    mixed = {"actors": ["a", "b", "c"], "current": 1, "next": ["q"]}
    assert parse_envelope(_body(route=mixed)).route == Route(prev=["a"], curr="b", next=["q"])


def test_envelope_copy_shares_no_mutable_members() -> None:
    env = parse_envelope(json.dumps(VALID))
    dup = env.copy()
    assert dup.to_dict() == env.to_dict()
    dup.headers["nested"]["k"].append(3)
    dup.route.next.append("more")
    dup.payload["text"] = "changed"
    assert env.to_dict() == VALID


def test_parse_error_names_the_member() -> None:
    with pytest.raises(EnvelopeParseError) as info:
        parse_envelope(_body(headers=3))
    assert "headers" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_envelope_to_json_is_compact_utf8() -> None:
    env = Envelope(id="é", route=Route([], "a", []), payload={"k": "ü"})
    text = env.to_json()
    assert '"id":"é"' in text
    assert " " not in text


def _refuse(name: str) -> None:
    raise ValueError(name)


@pytest.mark.parametrize("body", ["\ufeff{}", '{"id": NaN}', "[1", "{} x", ""])
def test_p_env_9_parse_errors_are_those_of_json_loads(body: str) -> None:
    """The shared decoder answers what ``json.loads`` would, its BOM check included."""
    try:
        json.loads(body, parse_constant=_refuse)
    except json.JSONDecodeError as exc:
        expected = f"body is not JSON: {exc.msg} at position {exc.pos}"
    except ValueError as exc:
        expected = f"body is not JSON: {exc} is not a JSON value"
    with pytest.raises(EnvelopeParseError) as caught:
        parse_envelope(body)
    assert str(caught.value) == expected
