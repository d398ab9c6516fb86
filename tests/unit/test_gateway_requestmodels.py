"""The request models (``asya_gateway.requestmodels``): the mapper from pydantic's errors to the gateway's 400s
(GW-GEN-2), and the OpenAPI document's body schemas, which are the models' own (GW-OPS-2)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from asya.manifest import Manifest
from asya_gateway.errors import HttpError
from asya_gateway.openapi import openapi_document
from asya_gateway.requestmodels import (
    REQUEST_MODELS,
    CreateRequest,
    DiagnosticRequest,
    ProducerEvent,
    RedriveRequest,
    RequestModel,
    ResumeRequest,
    RetryRequest,
    parse_body,
)

pytestmark = pytest.mark.unit


class _Probe(RequestModel):
    count: int
    name: str = "x"


def _refusal(model: type[RequestModel], body: dict[str, Any], **context: Any) -> tuple[int, str]:
    with pytest.raises(HttpError) as info:
        parse_body(model, body, **context)
    return info.value.status, info.value.message


def test_gw_gen_2_an_unworded_error_is_a_400_naming_the_field_and_the_value() -> None:
    assert _refusal(_Probe, {"count": "7"}) == (400, 'count: input should be a valid integer, got "7"')
    assert _refusal(_Probe, {"count": 1.0}) == (400, "count: input should be a valid integer, got 1.0")
    assert _refusal(_Probe, {}) == (400, "count is required")
    assert parse_body(_Probe, {"count": 3}) == _Probe(count=3)


def test_gw_gen_2_an_unknown_member_is_named_before_any_other_error() -> None:
    assert _refusal(_Probe, {"count": "bad", "name": 5, "colour": 1}) == (400, "unknown field 'colour'")
    # of two unknown members, a routing one points at the query whatever its place in the body (GW-CREATE-3)
    assert _refusal(CreateRequest, {"zzz": 1, "next": ["a"]}, user_actors=()) == (
        400,
        "routing fields are not allowed in the body: 'next'; the entry point is ?actor= or ?flow=",
    )


@pytest.mark.parametrize(
    ("model", "body", "message"),
    [
        (RedriveRequest, {"limit": None}, "limit: a whole number 1..1000, got None"),
        (RedriveRequest, {"limit": True}, "limit: a whole number 1..1000, got True"),
        (RetryRequest, {"from": 1.5}, "from: a hop index or ACTOR[#n], got 1.5"),
        (DiagnosticRequest, {"actors": ["a", 1]}, "actors must be an array of actor names"),
        (DiagnosticRequest, {"actors": "a"}, "actors must be an array of actor names"),
        (ResumeRequest, {"input": {}, "timeout": 10.0}, "timeout must be an integer number of seconds between 1"),
        (ProducerEvent, {"type": "status", "status": "nope"}, 'status: invalid value "nope": use one of received'),
        (ProducerEvent, {"type": "fly", "data": {"__ref__": "s3://b/k"}}, "data: must not be a storage reference"),
    ],
)
def test_gw_gen_2_each_body_words_its_fields(model: type[RequestModel], body: dict[str, Any], message: str) -> None:
    status, text = _refusal(model, body)
    assert status == 400 and text.startswith(message), text


def _component_validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return Draft202012Validator(schema)


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (CreateRequest, {}),
        (CreateRequest, {"payload": [1], "headers": None, "timeout": 604800}),
        (CreateRequest, {"timeout": 604801}),
        (CreateRequest, {"timeout": "30"}),
        (CreateRequest, {"headers": []}),
        (CreateRequest, {"prompt": "hi"}),
        (ResumeRequest, {"input": {"ok": True}}),
        (ResumeRequest, {}),
        (ResumeRequest, {"input": [1]}),
        (RetryRequest, {"from": "analyze#2", "timeout": 5}),
        (RetryRequest, {"from": 3}),
        (RetryRequest, {"timeout": 0}),
        (RedriveRequest, {"limit": 1000}),
        (RedriveRequest, {"limit": 1001}),
        (ProducerEvent, {"type": "fly", "data": 1}),
        (ProducerEvent, {"type": "status", "status": "running"}),
        (ProducerEvent, {"type": "status", "status": "paused"}),
        (ProducerEvent, {"status": "running"}),
    ],
)
def test_gw_ops_2_the_documented_body_schema_is_the_model(
    example_manifest: Manifest, model: type[RequestModel], body: dict[str, Any]
) -> None:
    """The document's schema accepts a body exactly when the model does (bodies that no rule beyond JSON Schema
    refuses): the component is generated from the model, not written beside it."""
    document = openapi_document(example_manifest, version="test")
    assert model in REQUEST_MODELS
    documented = _component_validator(document, model.__name__).is_valid(body)
    try:
        parse_body(model, body, user_actors=("analyze",))
    except HttpError:
        accepted = False
    else:
        accepted = True
    assert documented is accepted, (model.__name__, body)
