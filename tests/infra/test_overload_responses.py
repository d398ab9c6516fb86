"""API Gateway's own refusals under load (docs/http.md GW-OVL-6): its stage throttle answers 429, a gateway function
it could not invoke and any other 5xx of its own answer 503, each with ``Retry-After`` and the ``{"error": ...}``
shape of GW-GEN-2."""

from __future__ import annotations

import json

import pytest

from asya.overload import DEFAULT_RETRY_AFTER_SECONDS
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra


def test_gw_ovl_6_gateway_responses_answer_overload_with_retry_after(example_synth: SynthesizedMesh) -> None:
    responses = {
        res["Properties"]["ResponseType"]: res["Properties"]
        for res in example_synth.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    expected = {"THROTTLED": "429", "INTEGRATION_FAILURE": "503", "DEFAULT_5XX": "503"}
    assert {kind: responses[kind]["StatusCode"] for kind in expected} == expected
    for kind in expected:
        props = responses[kind]
        assert props["ResponseParameters"] == {
            "gatewayresponse.header.Retry-After": f"'{DEFAULT_RETRY_AFTER_SECONDS}'"
        }, kind
        body = json.loads(props["ResponseTemplates"]["application/json"])
        assert list(body) == ["error"] and "overloaded" in body["error"], kind
