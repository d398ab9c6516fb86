"""The gateway's stream function (GW-SSE (R3), issue 27): a second function of the same code asset, sized for waiting
(128 MB, arm64), behind the stream routes; creation, listing, the producer route and the console stay on the main
function; both hold the gateway's grants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra


def _functions(synth: SynthesizedMesh) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{"main" | "stream": (logical id, properties)}`` of the two gateway functions."""
    found = {}
    for key, res in synth.of_type("AWS::Lambda::Function").items():
        props = res["Properties"]
        if props.get("Handler") == "run.sh":
            found["stream" if props["Description"].endswith(", streams") else "main"] = (key, props)
    assert set(found) == {"main", "stream"}, found
    return found


def _resource_id(synth: SynthesizedMesh, path: str) -> str:
    """The logical id of the API resource at ``path`` (``/a/{b}/c``), walked from the root."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    parent: str | None = None
    for part in path.strip("/").split("/"):
        matches = [
            key
            for key, res in resources.items()
            if res["Properties"]["PathPart"] == part
            and (
                ("Fn::GetAtt" in res["Properties"]["ParentId"])
                if parent is None
                else res["Properties"]["ParentId"].get("Ref") == parent
            )
        ]
        assert len(matches) == 1, (path, part, matches)
        parent = matches[0]
    assert parent is not None
    return parent


def _targets(synth: SynthesizedMesh, path: str) -> dict[str, str]:
    """``{http method: "main" | "stream"}`` of the methods at ``path``."""
    functions = _functions(synth)
    resource = _resource_id(synth, path)
    out = {}
    for res in synth.of_type("AWS::ApiGateway::Method").values():
        props = res["Properties"]
        if props["ResourceId"].get("Ref") != resource:
            continue
        uri = json.dumps(props["Integration"]["Uri"])
        (target,) = [name for name, (key, _) in functions.items() if key in uri]
        out[props["HttpMethod"]] = target
    return out


def test_stream_function_is_sized_for_waiting(example_synth: SynthesizedMesh) -> None:
    functions = _functions(example_synth)
    main, stream = functions["main"][1], functions["stream"][1]
    assert (stream["MemorySize"], stream["Architectures"], stream["Timeout"]) == (128, ["arm64"], 900)
    assert main["MemorySize"] == 1024
    # the same code asset, layers and environment: one build serves both
    assert stream["Code"] == main["Code"]
    assert stream["Layers"] == main["Layers"]
    assert stream["Environment"] == main["Environment"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # one task's SSE: GET streams; POST (the producer route, GW-EVT) stays on the main function
        ("/api/v1/mesh/{task_id}/events", {"GET": "stream", "ANY": "main"}),
        # many tasks' SSE (GW-SSE (R3))
        ("/api/v1/mesh/events", {"GET": "stream", "ANY": "main"}),
        # creation, listing and views stay on the main function
        ("/api/v1/mesh", {"ANY": "main"}),
        ("/api/v1/mesh/{task_id}", {"ANY": "main"}),
        ("/{proxy+}", {"ANY": "main"}),
        ("/mcp", {"ANY": "stream"}),
        ("/a2a", {"ANY": "stream"}),
    ],
)
def test_stream_routes_reach_the_stream_function_gw_sse_27(
    example_synth: SynthesizedMesh, path: str, expected: dict[str, str]
) -> None:
    assert _targets(example_synth, path) == expected


def test_stream_function_holds_the_gateways_table_grants(example_synth: SynthesizedMesh) -> None:
    functions = _functions(example_synth)

    def actions(name: str) -> set[str]:
        role = functions[name][1]["Role"]["Fn::GetAtt"][0]
        found: set[str] = set()
        for policy in example_synth.of_type("AWS::IAM::Policy").values():
            if role in {r["Ref"] for r in policy["Properties"]["Roles"]}:
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    action = statement["Action"]
                    found.update([action] if isinstance(action, str) else action)
        return found

    assert "dynamodb:BatchGetItem" in actions("stream")
    # MCP and A2A create tasks from the stream function: it needs what creation needs
    assert actions("main") - {"cloudwatch:GetMetricStatistics"} <= actions("stream")


def test_cdk_nag_clean_with_the_stream_function(example_synth: SynthesizedMesh) -> None:
    report = example_synth.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []
