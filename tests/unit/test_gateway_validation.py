"""Pure request handling of the gateway: create validation (GW-CREATE-1..6, P-LARGE-4), trace context (P-TRACE-2),
list query (GW-LIST-1), producer events (GW-EVT-1..4), body parsing (GW-GEN-5), request ids (GW-GEN-4) and
configuration."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from starlette.datastructures import Headers

from asya.manifest import Manifest
from asya.payloads import is_reference
from asya.store import FlyValue, StatusUpdate
from asya_gateway.body import parse_json_object
from asya_gateway.config import GatewayConfig, GatewayConfigError
from asya_gateway.errors import HttpError
from asya_gateway.listing import parse_list_query
from asya_gateway.producer import parse_producer_event
from asya_gateway.requestid import request_id_from_headers
from asya_gateway.tracing import is_valid_traceparent, is_valid_tracestate, trace_headers
from asya_gateway.validation import (
    nesting_exceeds,
    parse_create_body,
    resolve_target,
    schema_violation,
    validate_headers,
    validate_timeout,
)

pytestmark = pytest.mark.unit

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def http_error(fn: Any, *args: Any) -> tuple[int, str]:
    with pytest.raises(HttpError) as info:
        fn(*args)
    return info.value.status, info.value.message


# ---------------------------------------------------------------- target and body


def test_resolve_target_by_flow_and_actor_gw_create_1_2(example_manifest: Manifest) -> None:
    flow = resolve_target({"flow": "text-pipeline"}, example_manifest)
    assert flow.route == ("normalize", "analyze", "summarize")
    assert (flow.flow, flow.actor, flow.default_timeout, flow.progress) == ("text-pipeline", None, 120.0, "hops")
    assert flow.input_schema is not None
    actor = resolve_target({"actor": "analyze", "flow": ""}, example_manifest)
    assert (actor.route, actor.default_timeout, actor.flow) == (("analyze",), None, None)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, (400, "actor or flow query parameter required")),
        ({"actor": "", "flow": ""}, (400, "actor or flow query parameter required")),
        ({"actor": "a", "flow": "b"}, (400, "use either actor or flow, not both")),
        ({"actor": "x-sump"}, (400, "actor 'x-sump' is reserved for crew")),
        (
            {"actor": "Analyze"},
            (
                404,
                "actor not found: Analyze "
                "(actors: analyze, chunk, digest, normalize, publish, request-review, split, summarize, "
                "summarize-chunk)",
            ),
        ),
        (
            {"flow": "missing"},
            (404, "flow not found: missing (flows: documents, reviewed-text, sentences, text-pipeline, triage)"),
        ),
    ],
)
def test_resolve_target_errors_gw_create_1_2(
    example_manifest: Manifest, query: dict[str, str], expected: tuple[int, str]
) -> None:
    assert http_error(resolve_target, query, example_manifest) == expected


ACTORS = ("analyze", "normalize", "summarize")


def parse_body(body: Any) -> Any:
    return parse_create_body(body, user_actors=ACTORS)


def check_headers(headers: Any) -> dict[str, Any]:
    return validate_headers(headers, user_actors=ACTORS)


def test_parse_create_body_defaults_gw_create_4() -> None:
    body = parse_body({})
    assert (body.payload, body.headers, body.timeout) == (None, {}, None)
    full = parse_body({"payload": [1], "headers": {"k": "v"}, "timeout": None})
    assert (full.payload, full.headers, full.timeout) == ([1], {"k": "v"}, None)


@pytest.mark.parametrize("key", ["route", "route_next", "next"])
def test_routing_fields_are_refused_gw_create_3(key: str) -> None:
    assert http_error(parse_body, {key: ["a"], "zzz": 1}) == (
        400,
        f"routing fields are not allowed in the body: '{key}'; the entry point is ?actor= or ?flow=",
    )


def test_unknown_field_says_the_input_goes_under_payload_gw_create_3() -> None:
    """Issue 20 point 6: the GW-CREATE-3 prefix, then the fix."""
    assert http_error(parse_body, {"prompt": "hi"}) == (
        400,
        """unknown field 'prompt': the task input goes under 'payload', as in {"payload": {"prompt": ...}}; """
        "the body fields are payload, headers and timeout",
    )
    status, message = http_error(parse_body, {"payload": 1, "Payload": 2})
    assert (status, message.split(":")[0]) == (400, "unknown field 'Payload'")


@pytest.mark.parametrize("depth", [1, 255, 256])
def test_payload_nested_up_to_256_levels_is_accepted_gw_create_4(depth: int) -> None:
    payload: Any = "leaf"
    for level in range(depth):
        payload = [payload] if level % 2 else {"k": payload}
    assert parse_body({"payload": payload}).payload is payload
    assert parse_body({"headers": {"deep": payload}}).headers == {"deep": payload}, "each header value, as deep"


@pytest.mark.parametrize("depth", [257, 890, 5000])
def test_payload_nested_deeper_than_256_levels_is_refused_gw_create_4(depth: int) -> None:
    """R2 (issue 18 defect 3): the layer used to fail 500..890 levels the gateway had accepted."""
    payload: Any = 1
    for _ in range(depth):
        payload = [payload]
    assert http_error(parse_body, {"payload": payload}) == (400, "payload nesting exceeds 256 levels")
    assert http_error(parse_body, {"headers": {"deep": payload}}) == (400, "headers nesting exceeds 256 levels")


def test_nesting_counts_the_deepest_branch_gw_create_4() -> None:
    wide: Any = {"a": [1, 2, {"b": [[]]}], "c": {}}
    assert not nesting_exceeds(wide, 5)
    assert nesting_exceeds(wide, 4)
    assert not nesting_exceeds("scalar", 0)
    assert nesting_exceeds([], 0)


def test_null_payload_schema_error_says_what_to_send_gw_create_4(example_manifest: Manifest) -> None:
    """Issue 20 point 6: an empty body (payload absent) against a flow's input_schema, in words."""
    schema = example_manifest.flows["text-pipeline"].input_schema
    assert schema is not None
    assert schema_violation(None, schema) == '$: the payload is null or missing; send the input as {"payload": <input>}'
    assert schema_violation(None, {}) is None, "a schema that takes null is not refused"


@pytest.mark.parametrize(
    ("payload", "is_ref"),
    [
        ({"__ref__": "s3://bucket/payloads/x/0000-a-1.json"}, True),
        ({"__ref__": "http://x"}, False),
        ({"__ref__": "s3://b/k", "other": 1}, False),
        ({"__ref__": 5}, False),
        ("s3://b/k", False),
        (None, False),
    ],
)
def test_storage_reference_shape_p_large_4(payload: Any, is_ref: bool) -> None:
    assert is_reference(payload) is is_ref


def test_storage_reference_payload_is_refused_gw_create_4() -> None:
    assert http_error(parse_body, {"payload": {"__ref__": "s3://b/k"}}) == (
        400,
        "payload must not be a storage reference",
    )


# ---------------------------------------------------------------- headers and timeout


def test_headers_accepts_route_override_and_trace_gw_create_5() -> None:
    headers = {"x-asya-route-override": {"analyze": "summarize"}, "traceparent": PARENT, "tracestate": "a=b", "k": 1}
    assert check_headers(headers) == headers
    assert check_headers(None) == {}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([], "headers must be an object, got list"),
        ({"x-asya-flow": "f"}, "header 'x-asya-flow' is reserved"),
        ({"X-Asya-Progress": "final"}, "header 'X-Asya-Progress' is reserved"),
        ({"": 1}, "header key '' must be 1-128 characters long"),
        ({"k" * 129: 1}, f"header key '{'k' * 128}' must be 1-128 characters long"),
        (
            {"x-asya-route-override": ["a"]},
            "header 'x-asya-route-override' must be an object of actor names, got [\"a\"]",
        ),
        (
            {"x-asya-route-override": {"analyze": "Bad Name"}},
            "header 'x-asya-route-override' must be an object of actor names, got invalid name \"Bad Name\"",
        ),
        ({"traceparent": 5}, "header 'traceparent' must be a string, got 5"),
        (
            {"x-asya-route-override": {"analyze": "x-sink"}},
            "header 'x-asya-route-override' must not name crew actor 'x-sink'",
        ),
        (
            {"x-asya-route-override": {"x-sump": "analyze"}},
            "header 'x-asya-route-override' must not name crew actor 'x-sump'",
        ),
        (
            {"x-asya-route-override": {"analyze": "nosuch"}},
            "header 'x-asya-route-override' names undeclared actor 'nosuch' (actors: analyze, normalize, summarize)",
        ),
    ],
)
def test_headers_errors_gw_create_5(headers: Any, message: str) -> None:
    """The crew and undeclared override targets are R2 (P-ROUTE-7, issue 18 defect 2)."""
    assert http_error(check_headers, headers) == (400, message)


def test_headers_size_limit_16_kib_gw_create_5() -> None:
    fits = {"k": "v" * (16 * 1024 - len('{"k":""}'))}
    assert check_headers(fits) == fits
    status, message = http_error(check_headers, {"k": "v" * (16 * 1024)})
    assert status == 400
    assert message.endswith("over the limit of 16 KiB")


@pytest.mark.parametrize("value", [1, 300, 604800])
def test_timeout_valid_gw_create_6(value: int) -> None:
    assert validate_timeout(value) == value
    assert validate_timeout(None) is None


@pytest.mark.parametrize("value", [0, -5, 604801, 1.5, 10.0, "30", True, [30]])
def test_timeout_invalid_gw_create_6(value: Any) -> None:
    assert http_error(validate_timeout, value) == (
        400,
        "timeout must be an integer number of seconds between 1 and 604800",
    )


def test_schema_violation_names_path_and_reason_gw_create_4() -> None:
    schema = {
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string"}, "n": {"type": "array", "items": {"type": "integer"}}},
    }
    assert schema_violation({"text": "ok"}, schema) is None
    assert schema_violation({}, schema) == "$: 'text' is a required property"
    assert schema_violation({"text": 1}, schema) == "$.text: 1 is not of type 'string'"
    assert schema_violation({"text": "a", "n": [1, "x"]}, schema) == "$.n[1]: 'x' is not of type 'integer'"
    assert schema_violation(None, schema) == '$: the payload is null or missing; send the input as {"payload": <input>}'


# ---------------------------------------------------------------- trace context


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (PARENT, True),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", True),
        (PARENT + "-extra", False),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),
        ("garbage", False),
        (None, False),
    ],
)
def test_traceparent_validity_p_trace_2(value: Any, valid: bool) -> None:
    assert is_valid_traceparent(value) is valid


def test_trace_headers_precedence_p_trace_2() -> None:
    other = "00-11111111111111111111111111111111-2222222222222222-00"
    assert trace_headers(PARENT, "k=v", {"traceparent": other}) == {"traceparent": PARENT, "tracestate": "k=v"}
    assert trace_headers("bad", "k=v", {"traceparent": other, "tracestate": "b=1"}) == {
        "traceparent": other,
        "tracestate": "b=1",
    }
    fresh = trace_headers(None, "k=v", {"traceparent": "bad", "tracestate": "b=1"})
    assert set(fresh) == {"traceparent"}
    assert is_valid_traceparent(fresh["traceparent"])
    assert fresh["traceparent"] != trace_headers(None, None, {})["traceparent"]


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("congo=t61rcWkgMzE", True),
        ("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE", True),
        ("tenant1@vendor=v a l,,  k-2/x*=x", True),
        ("k=" + "v" * 255, True),
        ("a=b,,,", True),
        ("a=b,a=c", False),
        (",".join(f"k{i}=v" for i in range(33)), False),
        ("k=" + "v" * 257, False),
        ("Upper=v", False),
        ("k=", False),
        ("k=a=b", False),
        ("k=v\n", False),
        ("k=v\r\nX-Forged: 1", False),
        ("k=v ", True),
        ("", False),
        (" , ", False),
        ("k=" + "v" * 20000, False),
        (None, False),
        (5, False),
    ],
)
def test_tracestate_validity_gw_create_5(value: Any, valid: bool) -> None:
    assert is_valid_tracestate(value) is valid


def test_tracestate_over_512_characters_is_invalid_gw_create_5() -> None:
    fits = ",".join(f"k{i}={'v' * 11}" for i in range(32))
    assert len(fits) <= 512
    assert is_valid_tracestate(fits)
    over = ",".join(f"k{i}={'v' * 14}" for i in range(31))
    assert len(over) > 512
    assert not is_valid_tracestate(over)


@pytest.mark.parametrize(
    "bad_state",
    ["k=" + "v" * 20 * 1024, "k=v\nforged", "k=v,k=w", "not a tracestate"],
    ids=["20kb", "nl", "dup", "junk"],
)
def test_invalid_tracestate_is_dropped_never_forwarded_gw_create_5(bad_state: str) -> None:
    """R2 (issue 18 defect 10): a 20 KB HTTP ``tracestate`` bypassed the 16 KiB header cap and was forwarded."""
    assert trace_headers(PARENT, bad_state, {}) == {"traceparent": PARENT}
    assert trace_headers(None, None, {"traceparent": PARENT, "tracestate": bad_state}) == {"traceparent": PARENT}
    assert trace_headers(PARENT, "ok=1", {}) == {"traceparent": PARENT, "tracestate": "ok=1"}


def test_traceparent_of_a_later_version_is_bounded_gw_create_5() -> None:
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert is_valid_traceparent(later + "-" + "x" * 400)
    assert not is_valid_traceparent(later + "-" + "x" * 20000)
    assert not is_valid_traceparent(later + "-x\ny")
    assert not is_valid_traceparent(PARENT + "\n")


# ---------------------------------------------------------------- list query


def test_list_query_conversion_gw_list_1() -> None:
    assert parse_list_query({}, flows=FLOWS) == {}
    assert parse_list_query(
        {"status": "running", "flow": "text-pipeline", "limit": "5", "count": "true"}, flows=FLOWS
    ) == {
        "status": "running",
        "flow": "text-pipeline",
        "limit": 5,
        "count": True,
    }
    assert parse_list_query({"offset": "10", "count": "false", "cursor": ""}, flows=FLOWS) == {
        "offset": 10,
        "count": False,
    }


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "ten"}, "limit: invalid value 'ten': use an integer between 1 and 100"),
        ({"offset": "-1"}, "offset: invalid value '-1': use an integer between 0 and 10000"),
        ({"count": "1"}, "count: invalid value '1': use true or false"),
        ({"flow": "Text Pipeline"}, "flow: invalid value 'Text Pipeline': not a flow name"),
        ({"flow": "nosuch"}, "flow: unknown flow 'nosuch' (flows: text-pipeline)"),
    ],
)
def test_list_query_errors_gw_list_1(query: dict[str, str], message: str) -> None:
    assert http_error(lambda q: parse_list_query(q, flows=FLOWS), query) == (400, message)


FLOWS = ("text-pipeline",)


# ---------------------------------------------------------------- producer events


def test_step_events_become_running_with_route_progress_gw_evt_1_2() -> None:
    data = {"prev": ["normalize"], "curr": "analyze", "next": ["summarize"], "message_size_kb": 0.1, "junk": 1}
    update = parse_producer_event({"type": "status", "status": "received", "data": data}, "t1")
    assert isinstance(update, StatusUpdate)
    assert (update.status, update.step, update.actor, update.progress) == ("running", "received", "analyze", 36.7)
    assert dict(update.data) == {
        "prev": ["normalize"],
        "curr": "analyze",
        "next": ["summarize"],
        "message_size_kb": 0.1,
    }
    assert update.envelope_id == "t1"


def test_progress_percent_when_no_route_gw_evt_2() -> None:
    update = parse_producer_event({"type": "status", "status": "running", "data": {"progress_percent": 42}}, "t")
    assert isinstance(update, StatusUpdate)
    assert (update.status, update.step, update.progress, update.actor) == ("running", None, 42.0, None)
    retry = parse_producer_event({"type": "status", "status": "retrying", "data": {"prev": [], "next": []}}, "t")
    assert isinstance(retry, StatusUpdate)
    assert (retry.step, retry.progress) == ("retrying", None)


@pytest.mark.parametrize("status", ["paused", "succeeded", "failed", "canceled"])
def test_gw_evt_3_r3_crew_statuses_are_refused(status: str) -> None:
    """GW-EVT-3 (R3): x-pause, x-sink and x-sump write these; a reporter's post answers 400 whatever its data."""
    for data in ({}, {"result": 1, "pause_metadata": {"prompt": "ok?"}, "error": "x"}):
        with pytest.raises(HttpError) as info:
            parse_producer_event({"type": "status", "status": status, "data": data}, "t")
        assert (info.value.status, str(info.value)) == (400, f"status '{status}' is written by the crew only")


def test_gw_evt_3_r3_a_step_with_its_route_is_fenced_at_its_hop() -> None:
    """GW-EVT-3 (R3): ``data.prev`` names the hop (P-ACK-8's ``len(prev) + 1``); without it nothing is fenced."""
    step = parse_producer_event({"type": "status", "status": "completed", "data": {"prev": ["a", "b"]}}, "t")
    assert isinstance(step, StatusUpdate) and step.if_fence_at_most == 3
    bare = parse_producer_event({"type": "status", "status": "running", "data": {"progress_percent": 5}}, "t")
    assert isinstance(bare, StatusUpdate) and bare.if_fence_at_most is None


def test_fly_event_gw_evt_4() -> None:
    assert parse_producer_event({"type": "fly", "data": {"x": 1}}, "t") == FlyValue(
        payload={"x": 1}, actor=None, envelope_id="t"
    )
    assert parse_producer_event({"type": "fly"}, "t") == FlyValue(payload=None, actor=None, envelope_id="t")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "type: required: use 'status' or 'fly'"),
        ({"type": None}, "type: required: use 'status' or 'fly'"),
        ({"type": 3}, "unknown event type '3'"),
        ({"type": "fly", "extra": 1}, "unknown field 'extra'"),
        (
            {"type": "status"},
            "status: invalid value null: use one of received, processing, completed, retrying, running",
        ),
        (
            {"type": "status", "status": "running", "data": {"progress_percent": True}},
            "data.progress_percent must be a number between 0 and 100, got true",
        ),
        ({"type": "status", "status": "running", "data": {"message": 1}}, "data.message must be a string, got 1"),
    ],
)
def test_producer_event_errors_gw_evt_5(body: dict[str, Any], message: str) -> None:
    assert http_error(parse_producer_event, body, "t") == (400, message)


# ---------------------------------------------------------------- body, request id, config


def test_json_body_parsing_gw_gen_5() -> None:
    assert parse_json_object(b"") == {}
    assert parse_json_object(b'  {"a": [1]} ') == {"a": [1]}
    assert http_error(parse_json_object, b"{") == (400, "invalid JSON body")
    assert http_error(parse_json_object, b'{"a": NaN}') == (400, "invalid JSON body")
    assert http_error(parse_json_object, b"\xff\xfe") == (400, "invalid JSON body")
    assert http_error(parse_json_object, b"null") == (400, "body must be a JSON object")


def test_request_id_from_lambda_web_adapter_gw_gen_4() -> None:
    context = json.dumps({"requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"})
    assert request_id_from_headers(Headers({"x-amzn-request-context": context}), trust_request_context=True) == (
        "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    )


def test_local_request_id_never_comes_from_the_client_gw_gen_4() -> None:
    """Issue 18 defect 7: outside Lambda the header is the client's, never the adapter's."""
    context = json.dumps({"requestId": "chosen-by-the-caller"})
    generated = request_id_from_headers(Headers({"x-amzn-request-context": context}), trust_request_context=False)
    assert generated != "chosen-by-the-caller"
    assert str(uuid.UUID(generated, version=4)) == generated
    forged = [json.dumps({"requestId": bad}) for bad in ("\u0100", "a\nb", "x" * 129)]
    for headers in (
        {},
        {"x-amzn-request-context": "not json"},
        {"x-amzn-request-context": '{"requestId": 5}'},
        *({"x-amzn-request-context": context} for context in forged),  # echoed in a header: must stay printable
    ):
        generated = request_id_from_headers(Headers(headers), trust_request_context=True)
        assert len(generated) == 36
        assert generated.count("-") == 4


def test_config_from_env() -> None:
    config = GatewayConfig.from_env(
        {
            "ASYA_MANIFEST": "/opt/asya.yaml",
            "ASYA_TABLE": "t",
            "ASYA_BUCKET": "b",
            "ASYA_API_KEYS": " k1,,k2 ",
            "ASYA_SSE_MAX_SECONDS": "60",
            "AWS_LAMBDA_FUNCTION_NAME": "gw",
        }
    )
    assert (config.manifest_path, config.table, config.bucket, config.api_keys) == (
        "/opt/asya.yaml",
        "t",
        "b",
        ("k1", "k2"),
    )
    assert (config.sse_max_seconds, config.in_lambda) == (60.0, True)
    defaults = GatewayConfig.from_env({})
    assert (defaults.manifest_path, defaults.api_keys, defaults.in_lambda, defaults.sse_max_seconds) == (
        "asya.yaml",
        None,
        False,
        840.0,
    )
    with pytest.raises(GatewayConfigError, match="ASYA_SSE_MAX_SECONDS"):
        GatewayConfig.from_env({"ASYA_SSE_MAX_SECONDS": "-1"})
    with pytest.raises(GatewayConfigError, match="ASYA_SSE_MAX_SECONDS must be a number of seconds, got 'soon'"):
        GatewayConfig.from_env({"ASYA_SSE_MAX_SECONDS": "soon"})
    with pytest.raises(GatewayConfigError, match="ASYA_SSE_MAX_SECONDS must be > 0, got 'inf'"):
        GatewayConfig.from_env({"ASYA_SSE_MAX_SECONDS": "inf"})


@pytest.mark.parametrize(
    ("raw", "keys"),
    [
        ('["k1", "", "k,2"]', ("k1", "k,2")),  # the deployed secret's JSON array form (GW-AUTH-4)
        ("k1, k2", ("k1", "k2")),
        ("12345", ("12345",)),  # a JSON scalar is a plain key
        ('"k1"', ('"k1"',)),
    ],
)
def test_gw_auth_4_asya_api_keys_takes_the_secret_s_array_form_or_a_comma_list(raw: str, keys: tuple[str, ...]) -> None:
    assert GatewayConfig.from_env({"ASYA_API_KEYS": raw}).api_keys == keys


@pytest.mark.parametrize(("raw", "kind"), [('{"key": "k1"}', "an object"), ('["k1", 2]', "an array holding")])
def test_gw_auth_4_asya_api_keys_refuses_json_that_is_not_an_array_of_strings(raw: str, kind: str) -> None:
    with pytest.raises(GatewayConfigError, match=f"environment variable ASYA_API_KEYS must be .* got {kind}"):
        GatewayConfig.from_env({"ASYA_API_KEYS": raw})
