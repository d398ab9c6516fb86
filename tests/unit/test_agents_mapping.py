"""Pure parts of the agent protocols: the manifest's ``mcp``/``a2a``/``gateway.a2a`` fields, the MCP tool list and
result mapping (GW-MCP-5, GW-MCP-7), the agent card (GW-A2A-1, GW-A2A-2), A2A message/task mapping (GW-A2A-5,
GW-A2A-9, GW-A2A-10) and its A2A 1.0 wire form."""

from __future__ import annotations

from typing import Any

import pytest

from asya.exceptions import ManifestError
from asya.manifest import Manifest, parse_manifest
from asya_gateway.a2a import build_card, v1
from asya_gateway.a2a.mapping import A2AParamsError, a2a_state, message_payload, task_object
from asya_gateway.mcp.tools import list_tools, tool_result

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"


def _data(**flows: Any) -> dict[str, Any]:
    return {
        "namespace": "demo",
        "actors": {"prep": {"handler": "mod.prep"}},
        "flows": {name: {"route": ["prep"], **spec} for name, spec in flows.items()},
    }


def _manifest(gateway: dict[str, Any] | None = None, **flows: Any) -> Manifest:
    data = _data(**flows)
    if gateway is not None:
        data["gateway"] = gateway
    return parse_manifest(data)


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    return str(info.value)


def test_gw_mcp_5_manifest_rejects_an_mcp_flow_without_an_object_schema() -> None:
    data = _data(main={"mcp": True, "input_schema": {"type": "array"}})
    assert "flows.main.input_schema: an MCP flow needs an object schema (type: object), got type 'array'" in _error(
        data
    )


def test_gw_a2a_2_manifest_checks_the_a2a_fields() -> None:
    assert (
        "flows.main.a2a: must be true, false or an object (tags, examples, input_modes, output_modes) (got 'yes')"
        in (_error(_data(main={"a2a": "yes"})))
    )
    assert "flows.main.a2a.tag: unknown key (did you mean 'tags'?)" in _error(_data(main={"a2a": {"tag": ["x"]}}))
    bad_url = _data(main={})
    bad_url["gateway"] = {"a2a": {"public_url": "ftp://example.com"}}
    assert "gateway.a2a.public_url" in _error(bad_url)
    unknown = _data(main={})
    unknown["gateway"] = {"a2a": {"nme": "x"}}
    assert "gateway.a2a.nme: unknown key" in _error(unknown)


def test_gw_mcp_5_tools_are_the_mcp_flows_sorted() -> None:
    manifest = _manifest(
        zeta={"mcp": True, "description": "Z", "input_schema": {"type": "object", "required": ["a"]}},
        alpha={"mcp": True},
        hidden={},
    )
    assert list_tools(manifest) == [
        {"name": "alpha", "description": "", "inputSchema": {"type": "object"}},
        {"name": "zeta", "description": "Z", "inputSchema": {"type": "object", "required": ["a"]}},
    ]


@pytest.mark.parametrize(
    ("status", "text", "is_error", "structured"),
    [
        ({"status": "succeeded", "result": {"summary": "ok"}}, '{"summary":"ok"}', False, {"summary": "ok"}),
        ({"status": "succeeded", "result": "plain"}, "plain", False, None),
        ({"status": "succeeded", "result": [1, 2]}, "[1,2]", False, None),
        ({"status": "failed", "error": "ValueError: bad"}, "ValueError: bad", True, None),
        ({"status": "canceled"}, "task was canceled", True, None),
        ({"status": "running"}, f"timeout: no result received (task {TASK} is running)", True, None),
    ],
)
def test_gw_mcp_7_result_mapping(status: dict[str, Any], text: str, is_error: bool, structured: Any) -> None:
    result = tool_result(TASK, status)
    assert result["content"] == [{"type": "text", "text": text}]
    assert result["isError"] is is_error
    assert result.get("structuredContent") == structured
    assert result["_meta"] == {"asya/task_id": TASK}


def test_gw_mcp_7_a_paused_task_answers_with_its_prompt() -> None:
    pause = {"prompt": "Approve?", "fields": [{"name": "ok", "type": "boolean"}]}
    result = tool_result(TASK, {"status": "paused", "pause_metadata": pause})
    assert result["isError"] is False
    assert result["content"][0]["text"] == (
        '{"status":"paused","task_id":"' + TASK + '","prompt":"Approve?","fields":[{"name":"ok","type":"boolean"}]}'
    )


def test_gw_a2a_1_2_card_from_the_manifest() -> None:
    manifest = _manifest(
        {"auth": {"mode": "api_key", "api_key_secret": "s"}, "a2a": {"public_url": "https://x.example/prod/"}},
        text={"a2a": {"tags": ["t"], "examples": ["hi"], "input_modes": ["text/plain"]}, "description": "T"},
        plain={"a2a": True},
        off={"a2a": False},
    )
    card = build_card(manifest, "http://ignored")
    assert card["url"] == "https://x.example/prod/a2a/"
    assert card["supportedInterfaces"] == [
        {"url": "https://x.example/prod/a2a/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://x.example/prod/a2a/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    assert (card["name"], card["version"], card["protocolVersion"]) == ("Asya Gateway", "1.0.0", "0.3.0")
    assert "provider" not in card
    assert card["skills"] == [
        {"id": "plain", "name": "plain", "description": "", "tags": ["plain"]},
        {
            "id": "text",
            "name": "text",
            "description": "T",
            "tags": ["t"],
            "examples": ["hi"],
            "inputModes": ["text/plain"],
        },
    ]
    assert card["security"] == [{"apiKey": []}]
    iam = build_card(_manifest(None, text={"a2a": True}), "http://127.0.0.1:8080")
    assert iam["url"] == "http://127.0.0.1:8080/a2a/" and "securitySchemes" not in iam and "security" not in iam


def test_gw_a2a_5_message_to_payload() -> None:
    text_only, history = message_payload(
        {"messageId": "m", "parts": [{"kind": "text", "text": "a"}, {"kind": "text", "text": "b"}]}
    )
    assert text_only == {"query": "a\nb"} and history == {"id": "m", "role": "user", "text": "a\nb"}
    one_data, _ = message_payload({"parts": [{"kind": "data", "data": {"x": 1}}]})
    assert one_data == {"x": 1}
    merged, _ = message_payload(
        {
            "parts": [
                {"kind": "data", "data": {"x": 1}},
                {"kind": "data", "data": {"x": 2, "y": 3}},
                {"kind": "text", "text": "q"},
            ]
        }
    )
    assert merged == {"x": 2, "y": 3, "query": "q"}
    files, _ = message_payload(
        {"parts": [{"kind": "file", "file": {"name": "a.txt", "mimeType": "text/plain", "uri": "s3://b/k"}}]}
    )
    assert files == {"query": "", "files": [{"name": "a.txt", "mime_type": "text/plain", "uri": "s3://b/k"}]}
    with pytest.raises(A2AParamsError, match=r"params\.message\.parts\[0\]: expected a text, data or file part"):
        message_payload({"parts": [{"kind": "video"}]})
    with pytest.raises(A2AParamsError, match=r"params\.message\.parts must be a non-empty list"):
        message_payload({"parts": []})


def test_gw_a2a_9_state_mapping() -> None:
    assert [a2a_state(s) for s in ("pending", "running", "paused", "succeeded", "failed", "canceled")] == [
        "submitted",
        "working",
        "input-required",
        "completed",
        "failed",
        "canceled",
    ]


def test_gw_a2a_10_task_object_and_its_1_0_form() -> None:
    data = {
        "status": "succeeded",
        "result": {"summary": "ok"},
        "progress_percent": 100.0,
        "current_actor": "s",
        "timestamp": "2026-03-01T10:00:05.480Z",
    }
    task = task_object(TASK, "ctx", data, flow="text")
    assert task["status"] == {"state": "completed", "timestamp": "2026-03-01T10:00:05.480Z"}
    assert task["artifacts"] == [
        {
            "artifactId": "result",
            "name": "Task result",
            "parts": [{"kind": "text", "text": '{"summary":"ok"}'}, {"kind": "data", "data": {"summary": "ok"}}],
        }
    ]
    assert task["metadata"] == {"asya": {"flow": "text", "progress_percent": 100.0, "current_actor": "s"}}
    modern = v1.task_to_v1(task)
    assert modern["status"] == {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-03-01T10:00:05.480Z"}
    assert modern["artifacts"][0]["parts"] == [{"text": '{"summary":"ok"}'}, {"data": {"summary": "ok"}}]
    paused = task_object(
        TASK, "ctx", {"status": "paused", "pause_metadata": {"prompt": "Why?", "fields": []}}, flow=None
    )
    message = paused["status"]["message"]
    assert paused["status"]["state"] == "input-required"
    assert message["parts"] == [{"kind": "text", "text": "Why?"}, {"kind": "data", "data": {"fields": []}}]
    assert v1.stream_response({**paused, "kind": "task"})["task"]["status"]["message"]["role"] == "ROLE_AGENT"


def test_a2a_1_0_messages_are_read_as_0_3() -> None:
    message = {
        "messageId": "m",
        "role": "ROLE_USER",
        "parts": [
            {"text": "hi"},
            {"data": {"a": 1}},
            {"url": "https://x/y", "filename": "y", "mediaType": "text/plain"},
        ],
    }
    assert v1.message_from_v1(message)["parts"] == [
        {"kind": "text", "text": "hi"},
        {"kind": "data", "data": {"a": 1}},
        {"kind": "file", "file": {"name": "y", "mimeType": "text/plain", "uri": "https://x/y"}},
    ]
    assert v1.message_from_v1(message)["role"] == "user"


def _request(headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "path": "/.well-known/agent.json",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8080"), *raw],
        "query_string": b"",
    }
    return Request(scope)


def test_gw_a2a_2_card_url_behind_api_gateway_keeps_the_stage() -> None:
    from asya_gateway.a2a import base_url

    assert base_url(_request({})) == "http://127.0.0.1:8080"
    context = '{"requestId": "r", "domainName": "abc123.execute-api.eu-west-1.amazonaws.com", "stage": "prod"}'
    assert base_url(_request({"x-amzn-request-context": context})) == (
        "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    )
    assert base_url(_request({"x-amzn-request-context": "not json"})) == "http://127.0.0.1:8080"


def test_gw_a2a_2_card_of_a_jwt_gateway_names_the_bearer_scheme() -> None:
    auth = {"mode": "jwt", "jwks_url": "https://idp.example/jwks", "issuer": "https://idp.example", "audience": "asya"}
    card = build_card(_manifest({"auth": auth}, text={"a2a": True}), "http://127.0.0.1:8080")
    assert card["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}
    assert card["security"] == [{"bearer": []}]
