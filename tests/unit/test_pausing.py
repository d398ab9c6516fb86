"""``asya.pausing``: pause metadata (P-PAUSE-3), the resume input check (GW-RESUME-1), the paused file (P-PAUSE-4,
P-HDR-4), the merge (P-RESUME-4) and the restored envelope (P-RESUME-5)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asya.envelope import Envelope, Route, Status
from asya.pausing import (
    PauseMetadataError,
    ResumeMergeError,
    input_problem,
    merge_input,
    parse_metadata,
    paused_document,
    remaining_seconds,
    restored_envelope,
)

NOW = datetime(2026, 3, 1, 10, 0, 0, 700000, tzinfo=UTC)


def test_p_pause_3_default_and_valid_metadata() -> None:
    default = parse_metadata(None)
    assert (default.prompt, default.fields, default.merge) == ("Task paused", (), "shallow")
    assert default.to_dict() == {"prompt": "Task paused", "fields": []}
    parsed = parse_metadata(
        {
            "prompt": "Review",
            "fields": [{"name": "ok", "type": "boolean", "required": True}, {"name": "a/b", "prompt": "x"}],
            "merge": "deep",
        }
    )
    assert [f.name for f in parsed.fields] == ["ok", "a/b"]
    assert parsed.fields[1].type == "string" and parsed.fields[1].pointer == "/a~1b"
    assert parsed.merge == "deep"


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("text", "x-asya-pause: pause metadata must be an object, got 'text'"),
        ({"fields": []}, "x-asya-pause.prompt: must be a string, got None"),
        ({"prompt": "p", "merge": "wide"}, "x-asya-pause.merge: must be one of shallow, deep, got 'wide'"),
        ({"prompt": "p", "fields": {}}, "x-asya-pause.fields: must be a list, got {}"),
        ({"prompt": "p", "fields": ["a"]}, "x-asya-pause.fields[0]: a field must be an object, got 'a'"),
        ({"prompt": "p", "fields": [{"name": ""}]}, "x-asya-pause.fields[0].name: must be a non-empty string"),
        ({"prompt": "p", "fields": [{"name": "a", "type": "date"}]}, "x-asya-pause.fields[0].type: must be one of"),
        (
            {"prompt": "p", "fields": [{"name": "a", "payload_key": "a"}]},
            "x-asya-pause.fields[0].payload_key: must be a JSON Pointer",
        ),
        (
            {"prompt": "p", "fields": [{"name": "a", "required": "yes"}]},
            "x-asya-pause.fields[0].required: must be true or false",
        ),
        ({"prompt": "p", "fields": [{"name": "a", "size": 1}]}, "x-asya-pause.fields[0]: unknown member 'size'"),
        (
            {"prompt": "p", "fields": [{"name": "a"}, {"name": "a"}]},
            "x-asya-pause.fields[1].name: duplicate field name 'a'",
        ),
    ],
)
def test_p_pause_3_invalid_metadata_names_the_member(metadata: Any, message: str) -> None:
    with pytest.raises(PauseMetadataError) as info:
        parse_metadata(metadata)
    assert str(info.value).startswith(message)


FIELDS = {
    "prompt": "p",
    "fields": [
        {"name": "ok", "type": "boolean", "required": True},
        {"name": "n", "type": "number"},
        {"name": "i", "type": "integer"},
        {"name": "o", "type": "object"},
        {"name": "l", "type": "array"},
    ],
}


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"ok": True, "n": 1.5, "i": 2.0, "o": {}, "l": [], "other": "allowed"}, None),
        ({}, "missing required field 'ok'"),
        ({"ok": 1}, "field 'ok' must be boolean"),
        ({"ok": True, "n": True}, "field 'n' must be number"),  # number excludes booleans
        ({"ok": True, "i": 1.5}, "field 'i' must be integer"),  # integer excludes fractions
        ({"ok": True, "o": []}, "field 'o' must be object"),
        ({"ok": True, "l": {}}, "field 'l' must be array"),
        ([], "input must be an object"),
    ],
)
def test_gw_resume_1_input_against_fields(given: Any, problem: str | None) -> None:
    assert input_problem(FIELDS, given) == problem


def test_p_pause_4_remaining_seconds_floors_and_stops_at_zero() -> None:
    assert remaining_seconds("2026-03-01T10:01:00Z", NOW) == 59
    assert remaining_seconds("2026-03-01T09:00:00Z", NOW) == 0
    assert remaining_seconds(None, NOW) is None


def _at_pause(nxt: list[str]) -> Envelope:
    return Envelope(
        id="t1",
        route=Route(prev=["a"], curr="x-pause", next=nxt),
        payload={"doc": {"title": "T"}, "n": 1},
        headers={"x-asya-flow": "f", "x-asya-pause": {}, "x-asya-delay-until": "x", "traceparent": "tp", "keep": 1},
        status=Status(created_at="2026-03-01T09:59:00Z", deadline_at="2026-03-01T10:05:00Z"),
    )


def test_p_pause_4_paused_document_layout_without_transient_headers() -> None:
    document = paused_document(
        _at_pause(["x-resume", "b", "c"]), {"n": 1}, parse_metadata(None), now=NOW, remaining=299
    )
    assert document == {
        "id": "t1",
        "route": {"prev": ["a", "x-pause"], "curr": "", "next": ["b", "c"]},
        "headers": {"x-asya-flow": "f", "traceparent": "tp", "keep": 1},
        "status": {"created_at": "2026-03-01T09:59:00Z", "deadline_at": "2026-03-01T10:05:00Z"},
        "payload": {"n": 1},
        "pause": {
            "metadata": {"prompt": "Task paused", "fields": []},
            "paused_at": "2026-03-01T10:00:00Z",
            "remaining_seconds": 299,
        },
    }


def _document(metadata: dict[str, Any], payload: Any = None) -> dict[str, Any]:
    return {
        "id": "t1",
        "route": {"prev": ["a", "x-pause"], "curr": "", "next": ["b"]},
        "headers": {"keep": 1, "traceparent": "old"},
        "status": {"created_at": "2026-03-01T09:59:00Z"},
        "payload": {"doc": {"title": "T", "tags": ["x"]}, "n": 1} if payload is None else payload,
        "pause": {"metadata": metadata},
    }


def test_p_resume_4_fields_set_their_payload_key_creating_objects_and_ignore_other_keys() -> None:
    metadata = {
        "prompt": "p",
        "fields": [{"name": "title", "payload_key": "/doc/title"}, {"name": "who", "payload_key": "/review/by"}],
    }
    merged = merge_input(_document(metadata), {"title": "New", "who": "me", "stray": 1})
    assert merged == {"doc": {"title": "New", "tags": ["x"]}, "n": 1, "review": {"by": "me"}}
    with pytest.raises(ResumeMergeError, match=r"payload_key '/n/x': '/n' is not an object"):
        merge_input(_document({"prompt": "p", "fields": [{"name": "t", "payload_key": "/n/x"}]}), {"t": 1})


def test_p_resume_4_shallow_and_deep_merges() -> None:
    shallow = merge_input(_document({"prompt": "p", "fields": []}), {"doc": {"body": "B"}, "m": 2})
    assert shallow == {"doc": {"body": "B"}, "n": 1, "m": 2}
    deep = merge_input(_document({"prompt": "p", "fields": [], "merge": "deep"}), {"doc": {"body": "B"}, "n": [2]})
    assert deep == {"doc": {"title": "T", "tags": ["x"], "body": "B"}, "n": [2]}


def test_p_resume_4_input_and_stored_payload_must_be_objects() -> None:
    with pytest.raises(ResumeMergeError, match="resume input must be an object"):
        merge_input(_document({"prompt": "p"}), [1])
    with pytest.raises(ResumeMergeError, match="paused payload must be an object"):
        merge_input(_document({"prompt": "p"}, payload="text"), {})


@pytest.mark.parametrize(
    ("metadata", "stored", "given"),
    [
        ({"prompt": "p", "fields": []}, {}, {"__ref__": "s3://b/payloads/other/x.json"}),
        ({"prompt": "p", "fields": [], "merge": "deep"}, {}, {"__ref__": "s3://b/payloads/other/x.json"}),
        (
            {"prompt": "p", "fields": [{"name": "f", "payload_key": "/__ref__"}]},
            {},
            {"f": "s3://b/payloads/other/x.json"},
        ),
    ],
)
def test_p_resume_4_a_merge_that_ends_as_a_storage_reference_is_refused(
    metadata: dict[str, Any], stored: dict[str, Any], given: dict[str, Any]
) -> None:
    """GW-REF-2: the gateway refuses such inputs; x-resume refuses the merged result too, whatever made it."""
    with pytest.raises(ResumeMergeError, match="storage reference"):
        merge_input(_document(metadata, payload=stored), given)


def test_p_resume_5_restored_envelope_goes_on_under_the_same_id() -> None:
    destination, out = restored_envelope(
        _document({"prompt": "p"}), {"n": 2}, trace_headers={"traceparent": "new"}, now=NOW, timeout=60
    )
    assert destination == "b"
    assert out.id == "t1"
    assert out.route.to_dict() == {"prev": ["a", "x-pause", "x-resume"], "curr": "b", "next": []}
    assert out.headers == {"keep": 1, "traceparent": "new"}
    assert out.status is not None
    assert (out.status.phase, out.status.actor, out.status.created_at) == ("pending", "b", "2026-03-01T09:59:00Z")
    assert out.status.deadline_at == "2026-03-01T10:01:00Z"


def test_p_resume_5_an_empty_rest_of_route_completes_at_x_sink() -> None:
    document = _document({"prompt": "p"})
    document["route"]["next"] = ["x-resume"]
    destination, out = restored_envelope(document, {"n": 2}, trace_headers={}, now=NOW, timeout=None)
    assert destination == "x-sink"
    assert out.status is not None
    assert (out.status.phase, out.status.reason, out.status.deadline_at) == ("succeeded", "Completed", None)
    assert out.payload == {"n": 2}
