"""A2A message and result mapping (GW-A2A-5, GW-A2A-5a R3): numbers a protobuf client sent as doubles, and the
``a2a`` member the gateway adds, which its result artifact leaves out."""

from __future__ import annotations

from typing import Any

import pytest

from asya_gateway.a2a.mapping import message_payload, result_artifact


def _data_message(data: Any) -> dict[str, Any]:
    return {"messageId": "m-1", "parts": [{"kind": "data", "data": data}]}


def test_gw_a2a_5a_integral_doubles_of_a_data_part_become_ints() -> None:
    payload, history = message_payload(_data_message({"steps": 3.0, "nested": {"n": [1.0, 2.5, -4.0]}, "ok": True}))
    assert payload == {"steps": 3, "nested": {"n": [1, 2.5, -4]}, "ok": True}
    assert type(payload["steps"]) is int and type(payload["nested"]["n"][1]) is float
    assert type(payload["ok"]) is bool  # a bool is no number to convert
    assert history["data"] == payload


@pytest.mark.parametrize("value", [2.0**53 + 2, 1e300, float("inf")])
def test_gw_a2a_5a_doubles_beyond_exact_integers_stay_floats(value: float) -> None:
    payload, _ = message_payload(_data_message({"x": value}))
    assert type(payload["x"]) is float and payload["x"] == value


def test_gw_a2a_5a_the_result_artifact_leaves_out_the_gateways_a2a_member() -> None:
    result = {"text": "hi", "a2a": {"task": {"id": "t", "context_id": "c", "history": []}}}
    artifact = result_artifact({"result": result})
    assert artifact["parts"][0] == {"kind": "text", "text": '{"text":"hi"}'}
    assert artifact["parts"][1] == {"kind": "data", "data": {"text": "hi"}}
    assert result["a2a"]["task"]["id"] == "t"  # the stored result is not changed
