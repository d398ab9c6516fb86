"""Property tests (hypothesis, issue 18 "Build" 2) of the parsers that meet untrusted input: envelope parsing
(P-ENV-2, P-ENV-12, P-ENV-14), the ABI path language (PROTOCOL 3.4, P-ABI-15..18), the manifest loader (P-MAN-1) and
the SSE event writer (GW-SSE-3). Each either accepts its input or refuses it with its own error class, never another
exception; what it accepts round-trips. Example counts are bounded so the tier stays fast."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asya.abi_paths import delete_value, get_value, parse_path, set_value
from asya.envelope import Envelope, Route, parse_envelope, salvage_envelope
from asya.exceptions import AbiProtocolError, EnvelopeParseError, ManifestError
from asya.manifest import load_manifest, parse_manifest
from asya.serialize import render_path
from asya_gateway.sse import format_event

pytestmark = pytest.mark.fuzz

# no deadline and no too_slow check: both are wall-clock bounds, which a loaded 2-core box overruns
FAST = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20
)
actor_names = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}\Z")
timestamps = st.sampled_from(["2026-03-01T10:00:00Z", "2026-03-01T10:00:00.120Z", "not a time", 5, None])


@st.composite
def envelope_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """Well-formed envelopes, with status members of any type (P-ENV-12 drops the wrong ones)."""
    env: dict[str, Any] = {
        "id": draw(st.text(min_size=1, max_size=40)),
        "route": {
            "prev": draw(st.lists(actor_names, max_size=3)),
            "curr": draw(actor_names | st.just("")),
            "next": draw(st.lists(actor_names, max_size=3)),
        },
        "payload": draw(json_values),
    }
    if draw(st.booleans()):
        env["headers"] = draw(st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=3))
    if draw(st.booleans()):
        env["parent_id"] = draw(st.text(min_size=1, max_size=40))
    if draw(st.booleans()):
        env["status"] = {
            "phase": draw(st.sampled_from(["pending", "processing", "succeeded", "bogus", 3])),
            "actor": draw(actor_names | st.none() | st.integers()),
            "attempt": draw(st.integers(-2, 5) | st.booleans() | st.text(max_size=2)),
            "max_attempts": draw(st.integers(-2, 5)),
            "created_at": draw(timestamps),
            "deadline_at": draw(timestamps),
            "error": draw(st.none() | st.just({"message": "m", "type": "T"}) | json_values),
        }
    return env


def _no_crash(body: str | bytes) -> Envelope | None:
    try:
        return parse_envelope(body)
    except EnvelopeParseError as exc:
        assert str(exc), "a refusal says why"
        return None


@FAST
@given(st.binary(max_size=300))
def test_envelope_parsing_of_any_bytes_accepts_or_refuses_clearly_p_env_2(body: bytes) -> None:
    _no_crash(body)


@FAST
@given(json_values)
def test_envelope_parsing_of_any_json_value_accepts_or_refuses_clearly_p_env_2(value: Any) -> None:
    _no_crash(json.dumps(value))
    salvaged = salvage_envelope(json.dumps(value), new_id=lambda: "new", unknown_route=lambda: Route([], "x-sump", []))
    assert salvaged.id and salvaged.payload is None


@FAST
@given(envelope_dicts())
def test_envelope_round_trips_through_its_json_p_env_2_p_env_12(raw: dict[str, Any]) -> None:
    envelope = parse_envelope(json.dumps(raw))
    assert (envelope.id, envelope.payload, envelope.route.to_dict()) == (raw["id"], raw["payload"], raw["route"])
    again = parse_envelope(envelope.to_json())
    assert again.to_dict() == envelope.to_dict(), "a parsed envelope is a fixed point of to_json/parse"


@FAST
@given(st.lists(actor_names, max_size=5), st.integers(0, 6))
def test_legacy_route_converts_to_prev_curr_next_p_env_14(actors: list[str], current: int) -> None:
    raw = {"id": "t", "route": {"actors": actors, "current": current}, "payload": None}
    route = parse_envelope(json.dumps(raw)).route
    assert [*route.prev, *([route.curr] if route.curr else []), *route.next] == actors[: max(current, 0)] + (
        actors[current:] if current < len(actors) else []
    )
    assert route.prev == actors[:current]


path_text = st.text(alphabet=string.printable + "ü\u2028", max_size=30).map(lambda s: "." + s) | st.text(max_size=20)
segments = st.lists(st.text(max_size=8) | st.integers(-5, 5), max_size=5)


@FAST
@given(path_text)
def test_abi_path_parser_accepts_or_refuses_with_abi_protocol_error_p_abi_15(path: str) -> None:
    try:
        parsed = parse_path(path)
    except AbiProtocolError as exc:
        assert repr(path)[:20] in str(exc) or "path" in str(exc)
        return
    assert all(isinstance(seg, str | int | slice) for seg in parsed)


@FAST
@given(segments)
def test_abi_path_rendering_round_trips_p_abi_16(path_segments: list[str | int]) -> None:
    """The path syntax the layer writes in error messages (``render_path``) is the one handlers parse."""
    text = render_path(path_segments)
    assert parse_path(text) == tuple(path_segments)


@FAST
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    st.lists(st.text(max_size=6), min_size=1, max_size=4),
    json_values,
)
def test_abi_set_then_get_returns_the_value_then_delete_removes_it_p_abi_17(
    root: dict[str, Any], keys: list[str], value: Any
) -> None:
    path = render_path(keys)
    parsed = parse_path(path)
    try:
        set_value(root, parsed, value, path)
    except TypeError:
        return  # an intermediate key holds a non-object: refused, naming the path
    assert get_value(root, parsed, path) == value
    delete_value(root, parsed, path)
    with pytest.raises(KeyError):
        get_value(root, parsed, path)


manifest_like = st.fixed_dictionaries(
    {},
    optional={
        "namespace": st.text(max_size=12) | st.integers(),
        "defaults": st.dictionaries(st.sampled_from(["memory", "timeout", "batch_size", "env", "x"]), json_values),
        "actors": st.dictionaries(
            st.text(max_size=10),
            st.fixed_dictionaries(
                {}, optional={"handler": st.text(max_size=20) | st.integers(), "timeout": json_values}
            ),
            max_size=3,
        )
        | json_values,
        "flows": st.dictionaries(st.text(max_size=10), json_values, max_size=2) | json_values,
        "gateway": json_values,
        "storage": json_values,
    },
)


@settings(FAST, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(manifest_like | json_values)
def test_manifest_parser_accepts_or_refuses_with_manifest_error_p_man_1(tmp_path: Path, data: Any) -> None:
    try:
        parse_manifest(data, base_dir=tmp_path)
    except ManifestError as exc:
        assert str(exc).startswith("manifest")


@settings(FAST, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=string.printable + "\x00\ufeff: -[]{}&*!|>'\"%@`", max_size=200) | st.binary(max_size=100))
def test_manifest_loader_refuses_any_file_with_manifest_error_p_man_1(tmp_path: Path, content: str | bytes) -> None:
    path = tmp_path / "asya.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert str(path) in str(info.value), "the message names the file"


@FAST
@given(st.sampled_from(["status", "fly"]), json_values, st.none() | st.integers(0, 10**12))
def test_sse_event_is_one_data_line_that_decodes_to_the_value_gw_sse_3(
    name: str, data: Any, event_id: int | None
) -> None:
    """Whatever the value (strings with CR, LF, NEL, U+2028 ...), the event is ``id``/``event``/``data`` lines that any
    SSE parser splits the same way, and its data decodes back to the value."""
    text = format_event(name, data, event_id=event_id)
    assert text.endswith("\n\n")
    assert "\r" not in text
    lines = text[:-2].splitlines()
    assert text[:-2].split("\n") == lines, "no line break but LF"
    assert lines[-2:] == [f"event: {name}", lines[-1]]
    assert lines[-1].startswith("data: ")
    assert json.loads(lines[-1][len("data: ") :]) == data
    assert lines[:-2] == ([] if event_id is None else [f"id: {event_id}"])
