"""The agent protocol routes in the synthesized API: MCP at ``/mcp`` and A2A at ``/a2a/`` reach the gateway's stream
function (GW-SSE (R3): their waits follow tasks) through resources of their own, streamed (GW-GEN-1) and authorized
like every other non-public route (GW-AUTH-3), and both agent card paths are public (GW-AUTH-2, GW-A2A-1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya_cdk.gateway import AGENT_PATHS, PUBLIC_PATHS
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra


def _ref(value: Any) -> str:
    return str(value["Ref"])


def _methods_at(synth: SynthesizedMesh, path_part: str, parent_part: str | None = None) -> list[dict[str, Any]]:
    resources = synth.of_type("AWS::ApiGateway::Resource")
    ids = {
        key
        for key, res in resources.items()
        if res["Properties"]["PathPart"] == path_part
        and (
            (parent_part is None and "Fn::GetAtt" in res["Properties"]["ParentId"])
            or (
                parent_part is not None
                and "Ref" in res["Properties"]["ParentId"]
                and resources[_ref(res["Properties"]["ParentId"])]["Properties"]["PathPart"] == parent_part
            )
        )
    }
    assert len(ids) == 1, (path_part, ids)
    (resource_id,) = ids
    return [
        res["Properties"]
        for res in synth.of_type("AWS::ApiGateway::Method").values()
        if "Ref" in res["Properties"]["ResourceId"] and _ref(res["Properties"]["ResourceId"]) == resource_id
    ]


def _gateway_function_id(synth: SynthesizedMesh) -> str:
    functions = [
        key
        for key, res in synth.of_type("AWS::Lambda::Function").items()
        if res["Properties"].get("Handler") == "run.sh" and res["Properties"]["Description"].endswith(", streams")
    ]
    assert len(functions) == 1
    return functions[0]


@pytest.mark.parametrize("path", AGENT_PATHS)
def test_gw_gen_1_agent_routes_stream_to_the_stream_function(example_synth: SynthesizedMesh, path: str) -> None:
    methods = _methods_at(example_synth, path.strip("/"))
    assert [m["HttpMethod"] for m in methods] == ["ANY"]
    (method,) = methods
    assert method["AuthorizationType"] == "AWS_IAM"  # the example's gateway.auth.mode is iam (GW-AUTH-3)
    integration = method["Integration"]
    assert (integration["Type"], integration["ResponseTransferMode"]) == ("AWS_PROXY", "STREAM")
    assert integration["TimeoutInMillis"] == 900_000
    uri = json.dumps(integration["Uri"])
    assert "/response-streaming-invocations" in uri
    assert _gateway_function_id(example_synth) in uri


@pytest.mark.parametrize("name", ["agent.json", "agent-card.json"])
def test_gw_a2a_1_both_card_paths_are_public(example_synth: SynthesizedMesh, name: str) -> None:
    assert f"/.well-known/{name}" in PUBLIC_PATHS
    methods = {m["HttpMethod"]: m["AuthorizationType"] for m in _methods_at(example_synth, name, ".well-known")}
    assert methods == {"GET": "NONE", "ANY": "AWS_IAM"}
