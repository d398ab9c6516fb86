"""MCP (GATEWAY section 11) and A2A (section 12) over HTTP against a local mesh, driven by the real SDK clients:
the ``mcp`` 2.x client session over Streamable HTTP and the ``a2a-sdk`` 1.x client, which speaks A2A 1.0
(``SendMessage``, ...); the spec's 0.3 methods (``message/send``, ...) are driven over raw JSON-RPC, and the SDK's
0.3 compatibility transport once. The mesh (tests/e2e/agents/asya.yaml) uses ``api_key`` auth."""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from asya.manifest import Manifest, load_manifest
from asya_local.cli import main
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import E2E_DIR
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

KEY = "e2e-agents-key"
AUTH = {"X-API-Key": KEY}


@pytest.fixture(scope="module")
def agents_manifest() -> Manifest:
    return load_manifest(E2E_DIR / "agents" / "asya.yaml")


@pytest.fixture(scope="module")
def agents_mesh(agents_manifest: Manifest) -> Iterator[LocalMesh]:
    with LocalMesh(agents_manifest, port=0, gateway_env={"ASYA_API_KEYS": KEY}) as mesh:
        yield mesh


@asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str] | None = None, **kwargs: Any) -> AsyncIterator[ClientSession]:
    http = create_mcp_http_client(headers=AUTH if headers is None else headers)
    async with (
        http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, **kwargs) as session,
    ):
        await session.initialize()
        yield session


def _text_message(text: str, *, task_id: str | None = None) -> Message:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return message


def _data_message(data: dict[str, Any]) -> Message:
    return Message(
        role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(data=json_format.ParseDict(data, Value()))]
    )


def _send_request(text: str, skill: str, *, task_id: str | None = None) -> SendMessageRequest:
    request = SendMessageRequest(message=_text_message(text, task_id=task_id))
    request.metadata.update({"skill": skill})
    return request


def _send_data(data: dict[str, Any], skill: str) -> SendMessageRequest:
    request = SendMessageRequest(message=_data_message(data))
    request.metadata.update({"skill": skill})
    return request


def _rpc(url: str, method: str, params: dict[str, Any], **kwargs: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(f"{url}/a2a/", json=body, headers=AUTH, timeout=60, **kwargs)


# -- MCP ------------------------------------------------------------------------------------------------------


def test_mcp_initialize_and_list_tools_gw_mcp_1_4_5(agents_mesh: LocalMesh) -> None:
    async def run() -> tuple[str, list[Any]]:
        async with mcp_session(agents_mesh.url) as session:
            tools = await session.list_tools()
            assert (await session.send_ping()) is not None
            return session.initialize_result.protocol_version, tools.tools  # type: ignore[union-attr]

    version, tools = asyncio.run(run())
    assert version == "2025-11-25"  # the newest the SDK negotiates by initialize
    assert [tool.name for tool in tools] == ["doomed", "slow", "text-pipeline"]  # sorted, `internal` is not a tool
    pipeline = tools[2]
    assert pipeline.description == "Normalize, analyze and summarize a text"
    assert pipeline.input_schema["required"] == ["text"]
    assert tools[0].input_schema == {"type": "object"}


def test_mcp_call_streams_progress_then_fly_in_order_gw_mcp_7_9(agents_mesh: LocalMesh) -> None:
    seen: list[tuple[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(("progress", (progress, total, message)))

    async def on_log(params: Any) -> None:
        seen.append(("fly", params))

    async def run() -> Any:
        async with mcp_session(agents_mesh.url, logging_callback=on_log) as session:
            return await session.call_tool(
                "text-pipeline", {"text": "Hello World. Have a nice day."}, progress_callback=on_progress
            )

    result = asyncio.run(run())
    assert result.is_error is False
    summary = result.structured_content["summary"]
    assert summary.startswith("A positive text of 6 words")
    task_id = result.meta["asya/task_id"]
    uuid.UUID(task_id)
    assert result.content[0].text.startswith('{"text":"Hello World. Have a nice day."')
    progress = [value for kind, value in seen if kind == "progress"]
    percents = [p for p, _, _ in progress]
    assert percents == sorted(set(percents)) and percents[-1] == 100.0  # strictly increasing, ends at 100
    assert all(total == 100 for _, total, _ in progress)
    # the messages are "<current_actor>: <step>"; which steps a poll sees depends on timing (coalesced, GW-SSE-6)
    assert all(re.fullmatch(r"(normalize|analyze|summarize): \w+", m or "") for _, _, m in progress), progress
    fly = [value for kind, value in seen if kind == "fly"]
    assert {(p.level, p.logger) for p in fly} == {("info", "asya.fly")}
    assert all(p.data["task_id"] == task_id and p.data["actor"] == "summarize" for p in fly)
    assert "".join(p.data["payload"] for p in fly) == summary  # every value, in order
    # every FLY value is flushed before the hop completes, so none comes after the 100% notification (how many
    # running steps a poll sees before it depends on timing: changes between two polls coalesce, GW-SSE-6)
    kinds = [kind for kind, _ in seen]
    last_fly = len(kinds) - 1 - kinds[::-1].index("fly")
    assert all(p < 100 for p, _, _ in [v for k, v in seen[:last_fly] if k == "progress"])


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel is 2025-era
def test_mcp_set_level_above_info_mutes_fly_gw_mcp_9(agents_mesh: LocalMesh) -> None:
    fly: list[Any] = []

    async def on_log(params: Any) -> None:
        fly.append(params)

    async def run() -> Any:
        async with mcp_session(agents_mesh.url, logging_callback=on_log) as session:
            await session.set_logging_level("warning")
            return await session.call_tool("text-pipeline", {"text": "Quiet please."})

    result = asyncio.run(run())
    assert result.is_error is False and fly == []


def test_mcp_invalid_arguments_are_a_tool_error_gw_mcp_6(agents_mesh: LocalMesh) -> None:
    async def run() -> Any:
        async with mcp_session(agents_mesh.url) as session:
            return await session.call_tool("text-pipeline", {"text": ""})

    result = asyncio.run(run())
    assert result.is_error is True
    assert result.content[0].text.startswith("invalid arguments: $.text: ")
    assert "non-empty" in result.content[0].text or "short" in result.content[0].text


def test_mcp_unknown_tool_is_invalid_params_gw_mcp_6(agents_mesh: LocalMesh) -> None:
    async def run() -> None:
        async with mcp_session(agents_mesh.url) as session:
            for name in ("no-such-tool", "internal"):
                with pytest.raises(MCPError) as info:
                    await session.call_tool(name, {})
                assert info.value.error.code == -32602
                assert info.value.error.message == f"unknown tool: {name}"

    asyncio.run(run())


def test_mcp_failing_task_is_a_tool_error_gw_mcp_7(agents_mesh: LocalMesh) -> None:
    async def run() -> Any:
        async with mcp_session(agents_mesh.url) as session:
            return await session.call_tool("doomed", {"text": "boom"})

    result = asyncio.run(run())
    assert result.is_error is True
    assert result.content[0].text == "cannot process 'boom'"
    assert result.structured_content is None
    uuid.UUID(result.meta["asya/task_id"])


def test_mcp_call_without_sse_answers_one_json_response_gw_mcp_9(agents_mesh: LocalMesh) -> None:
    url = f"{agents_mesh.url}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05"}}
    response = httpx.post(url, json=init, headers=AUTH, timeout=10)
    assert response.json()["result"]["protocolVersion"] == "2024-11-05"
    headers = {**AUTH, "Mcp-Session-Id": response.headers["mcp-session-id"], "Accept": "application/json"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}}
    answer = httpx.post(url, json=call, headers=headers, timeout=60)
    assert answer.headers["content-type"].startswith("application/json")
    result = answer.json()["result"]
    assert result["structuredContent"] == {"seconds": 1, "lingered": True}
    assert result["isError"] is False


def test_mcp_missing_unknown_expired_and_deleted_sessions_gw_mcp_2(agents_mesh: LocalMesh) -> None:
    url = f"{agents_mesh.url}/mcp"
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    missing = httpx.post(url, json=ping, headers=AUTH, timeout=10)
    assert missing.status_code == 400
    assert missing.json()["error"] == {"code": -32600, "message": "Mcp-Session-Id header required"}
    unknown = httpx.post(url, json=ping, headers={**AUTH, "Mcp-Session-Id": str(uuid.uuid4())}, timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32600
    # an item whose ttl passed is expired even though DynamoDB (and moto) has not deleted it yet (GW-DATA-5)
    expired = str(uuid.uuid4())
    agents_mesh.clients.dynamodb.put_item(
        TableName=agents_mesh.manifest.table_name,
        Item={
            "pk": {"S": f"MCPSESSION#{expired}"},
            "sk": {"S": "SESSION"},
            "protocol_version": {"S": "2025-06-18"},
            "log_level": {"S": "info"},
            "ttl": {"N": "1000"},
        },
    )
    stale = httpx.post(url, json=ping, headers={**AUTH, "Mcp-Session-Id": expired}, timeout=10)
    assert stale.status_code == 404
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    session = httpx.post(url, json=init, headers=AUTH, timeout=10).headers["mcp-session-id"]
    live = {**AUTH, "Mcp-Session-Id": session}
    assert httpx.post(url, json=ping, headers=live, timeout=10).json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    bad_version = httpx.post(url, json=ping, headers={**live, "MCP-Protocol-Version": "1999-01-01"}, timeout=10)
    assert bad_version.status_code == 400 and bad_version.json()["error"]["code"] == -32600
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=note, headers=live, timeout=10).status_code == 202
    assert httpx.post(url, json=[ping], headers=live, timeout=10).json()["error"]["code"] == -32600
    assert httpx.post(url, content=b"{nope", headers=live, timeout=10).json()["error"]["code"] == -32700
    assert httpx.post(url, json={**ping, "method": "nope"}, headers=live, timeout=10).json()["error"]["code"] == -32601
    assert httpx.get(url, headers=live, timeout=10).status_code == 405
    assert httpx.delete(url, headers=live, timeout=10).status_code == 204
    assert httpx.post(url, json=ping, headers=live, timeout=10).status_code == 404


# -- A2A ------------------------------------------------------------------------------------------------------


def test_a2a_card_is_public_and_built_from_the_manifest_gw_a2a_1_2(agents_mesh: LocalMesh) -> None:
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        card = httpx.get(f"{agents_mesh.url}{path}", timeout=10).json()
        assert card["name"] == "Agents E2E" and card["version"] == "2.0.0"
        assert card["url"] == f"{agents_mesh.url}/a2a/"
        assert card["provider"]["organization"] == "Asya"
        assert [s["id"] for s in card["skills"]] == ["doomed", "slow", "text-pipeline"]
        assert card["skills"][2]["tags"] == ["text"] and card["skills"][2]["examples"] == ["Hello World"]
        assert card["skills"][1]["tags"] == ["slow"]
        assert card["securitySchemes"] == {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}


def test_card_and_tools_change_with_the_manifest(agents_mesh: LocalMesh, local_mesh: LocalMesh) -> None:
    """The example manifest has other flows and iam auth: other skills, other tools, no security schemes."""
    card = httpx.get(f"{local_mesh.url}/.well-known/agent-card.json", timeout=10).json()
    assert [s["id"] for s in card["skills"]] == ["sentences", "text-pipeline"]
    assert "securitySchemes" not in card and card["name"] == "Asya Gateway"

    async def names(url: str, headers: dict[str, str]) -> list[str]:
        async with mcp_session(url, headers) as session:
            return [tool.name for tool in (await session.list_tools()).tools]

    assert asyncio.run(names(local_mesh.url, {})) == ["sentences", "text-pipeline"]
    assert asyncio.run(names(agents_mesh.url, AUTH)) == ["doomed", "slow", "text-pipeline"]


@asynccontextmanager
async def a2a_client(url: str, *, streaming: bool) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers=AUTH, timeout=120) as http:
        client = await create_client(url, ClientConfig(streaming=streaming, httpx_client=http))
        try:
            yield client
        finally:
            await client.close()


def test_a2a_send_blocking_returns_the_completed_task_gw_a2a_8_10(agents_mesh: LocalMesh) -> None:
    seen_transports: list[str] = []

    async def run() -> Any:
        async with a2a_client(agents_mesh.url, streaming=False) as client:
            seen_transports.append(type(client._transport).__name__)
            events = [
                e async for e in client.send_message(_send_data({"text": "Good morning. Sunny day."}, "text-pipeline"))
            ]
            task = events[-1].task
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            return task, fetched

    task, fetched = asyncio.run(run())
    assert seen_transports == ["JsonRpcTransport"]  # A2A 1.0, not the 0.3 compatibility transport
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    uuid.UUID(task.id)
    assert task.context_id
    artifact = task.artifacts[0]
    assert artifact.artifact_id == "result"
    result = json_format.MessageToDict(artifact.parts[1].data)
    assert result["text"] == "Good morning. Sunny day." and result["summary"].startswith("A ")
    assert "a2a" not in result  # the gateway's own member of the payload stays out of the artifact (GW-A2A-5a)
    assert fetched.id == task.id and fetched.status.state == TaskState.TASK_STATE_COMPLETED


def test_a2a_stream_sends_task_working_fly_result_final_gw_a2a_11(agents_mesh: LocalMesh, tmp_path: Path) -> None:
    """The ``slow`` flow ticks twice, then waits for the gate the test opens once the stream said ``working``: the
    stream sees it working whatever the poll cadence and the box's load."""
    gate = tmp_path / "gate"

    async def run() -> list[Any]:
        events = []
        async with a2a_client(agents_mesh.url, streaming=True) as client:
            async for event in client.send_message(_send_data({"seconds": 2, "gate": str(gate)}, "slow")):
                events.append(event)
                if event.WhichOneof("payload") == "status_update":
                    gate.touch()
        return events

    events = asyncio.run(run())
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert kinds[-1] == "status_update" and events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    working = [e.status_update for e in events[1:-1] if e.WhichOneof("payload") == "status_update"]
    assert working and {u.status.state for u in working} == {TaskState.TASK_STATE_WORKING}
    artifacts = [e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"]
    fly = [a for a in artifacts if a.artifact.artifact_id == "fly-stream"]
    assert [a.artifact.parts[0].text for a in fly] == ["tick 0", "tick 1", ""]  # every value, then the closing chunk
    assert [a.append for a in fly] == [False, True, True]
    assert [a.last_chunk for a in fly] == [False, False, True]
    assert artifacts[-1].artifact.artifact_id == "result" and artifacts[-1].last_chunk
    result = json_format.MessageToDict(artifacts[-1].artifact.parts[1].data)
    assert (result["seconds"], result["lingered"]) == (2, True)


def test_a2a_sdk_0_3_transport_speaks_the_spec_methods_gw_a2a_3_11(agents_mesh: LocalMesh) -> None:
    """The card also offers JSON-RPC 0.3 (GW-A2A-1); the SDK's 0.3 transport sends ``message/stream`` and
    ``tasks/get`` and parses our 0.3 events."""
    card = httpx.get(f"{agents_mesh.url}/.well-known/agent.json", timeout=10).json()
    card["supportedInterfaces"] = [i for i in card["supportedInterfaces"] if i["protocolVersion"] == "0.3"]

    async def run() -> tuple[str, list[Any], Any]:
        async with httpx.AsyncClient(headers=AUTH, timeout=120) as http:
            client = await create_client(parse_agent_card(card), ClientConfig(streaming=True, httpx_client=http))
            try:
                events = [e async for e in client.send_message(_send_data({"text": "Hi there"}, "text-pipeline"))]
                task = await client.get_task(GetTaskRequest(id=events[0].task.id))
                return type(client._transport).__name__, events, task
            finally:
                await client.close()

    transport, events, task = asyncio.run(run())
    assert transport == "CompatJsonRpcTransport"
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    fly = [e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"]
    assert fly[0].artifact.artifact_id == "fly-stream" and fly[-1].artifact.artifact_id == "result"
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and task.artifacts[0].artifact_id == "result"


def test_a2a_failed_task_and_skill_errors_gw_a2a_4_9(agents_mesh: LocalMesh) -> None:
    failed = _rpc(
        agents_mesh.url,
        "message/send",
        {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "m-1",
                "parts": [{"kind": "text", "text": "x"}],
            },
            "metadata": {"skill": "doomed"},
        },
    ).json()["result"]
    assert failed["status"]["state"] == "failed"
    assert "cannot process" in failed["status"]["message"]["parts"][0]["text"]
    message = {"kind": "message", "role": "user", "messageId": "m-2", "parts": [{"kind": "text", "text": "x"}]}
    several = _rpc(agents_mesh.url, "message/send", {"message": message}).json()["error"]
    assert several["code"] == -32602 and several["message"].startswith("several skills are available")
    unknown = _rpc(agents_mesh.url, "message/send", {"message": message, "metadata": {"skill": "internal"}})
    assert unknown.json()["error"] == {"code": -32602, "message": "unknown skill: internal"}
    schema = _rpc(agents_mesh.url, "message/send", {"message": message, "metadata": {"skill": "text-pipeline"}})
    assert schema.json()["error"]["code"] == -32602 and "input_schema" in schema.json()["error"]["message"]
    assert _rpc(agents_mesh.url, "tasks/get", {"id": "nope"}).json()["error"]["code"] == -32001
    assert _rpc(agents_mesh.url, "tasks/pushNotificationConfig/set", {}).json()["error"]["code"] == -32003
    assert _rpc(agents_mesh.url, "tasks/nope", {}).json()["error"]["code"] == -32601
    batch = httpx.post(f"{agents_mesh.url}/a2a/", json=[{"jsonrpc": "2.0"}], headers=AUTH, timeout=10)
    assert (batch.status_code, batch.json()["error"]["code"]) == (200, -32600)  # GW-A2A-3: errors with HTTP 200
    broken = httpx.post(f"{agents_mesh.url}/a2a/", content=b"{", headers=AUTH, timeout=10)
    assert (broken.status_code, broken.json()["error"]["code"]) == (200, -32700)


def test_a2a_cancel_a_running_task_then_it_is_not_cancelable_gw_a2a_12(agents_mesh: LocalMesh, tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # never opened: linger holds the task until it is canceled (15 s at most)

    async def run() -> tuple[Any, Any]:
        async with a2a_client(agents_mesh.url, streaming=False) as client:
            request = _send_data({"seconds": 1, "gate": str(gate)}, "slow")
            request.configuration.return_immediately = True
            events = [e async for e in client.send_message(request)]
            task_id = events[-1].task.id
            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(TaskNotCancelableError) as info:  # -32002
                await client.cancel_task(CancelTaskRequest(id=task_id))
            return canceled, info.value

    try:
        canceled, error = asyncio.run(run())
    finally:
        gate.touch()  # free linger's poller
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert "task cannot be canceled (status: canceled)" in str(error)


def test_a2a_resubscribe_after_a_disconnect_gw_a2a_13(agents_mesh: LocalMesh, tmp_path: Path) -> None:
    """The task waits in linger until the test has resubscribed (a subscription to an ended task is refused), so a
    slow resubscription on a loaded box still finds it running."""
    gate = tmp_path / "gate"
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-r",
        "parts": [{"kind": "data", "data": {"seconds": 1, "gate": str(gate)}}],
    }
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "message/stream",
        "params": {"message": message, "metadata": {"skill": "slow"}},
    }
    with httpx.stream("POST", f"{agents_mesh.url}/a2a/", json=body, headers=AUTH, timeout=30) as response:
        first = next(line for line in response.iter_lines() if line.startswith("data: "))
    task_id = httpx.Response(200, content=first[6:]).json()["result"]["id"]  # the client went away here

    async def run() -> list[Any]:
        events = []
        async with a2a_client(agents_mesh.url, streaming=True) as client:
            async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                events.append(event)
                gate.touch()  # subscribed: the task may end now
        return events

    try:
        events = asyncio.run(run())
    finally:
        gate.touch()
    assert events[0].WhichOneof("payload") == "task"  # A2A 1.0: the Task first
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    result = [e.artifact_update for e in events if e.WhichOneof("payload") == "artifact_update"]
    assert result[-1].artifact.artifact_id == "result"
    data = json_format.MessageToDict(result[-1].artifact.parts[1].data)
    assert data == {"seconds": 1, "gate": str(gate), "lingered": True}


def test_a2a_message_with_task_id_of_a_task_not_waiting_gw_a2a_7(agents_mesh: LocalMesh) -> None:
    done = _rpc(
        agents_mesh.url,
        "message/send",
        {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "a",
                "parts": [{"kind": "data", "data": {"seconds": 1}}],
            },
            "metadata": {"skill": "slow"},
        },
    ).json()["result"]
    again = {
        "kind": "message",
        "role": "user",
        "messageId": "b",
        "taskId": done["id"],
        "parts": [{"kind": "text", "text": "more"}],
    }
    error = _rpc(agents_mesh.url, "message/send", {"message": again}).json()["error"]
    assert error == {"code": -32004, "message": f"task {done['id']} is not waiting for input (status: succeeded)"}
    unknown = {**again, "taskId": str(uuid.uuid4())}
    assert _rpc(agents_mesh.url, "message/send", {"message": unknown}).json()["error"]["code"] == -32001


# -- auth -----------------------------------------------------------------------------------------------------


def test_auth_failures_gw_auth_7(agents_mesh: LocalMesh) -> None:
    url = agents_mesh.url
    ping = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    none = httpx.post(f"{url}/mcp", json=ping, timeout=10)
    assert none.status_code == 401 and none.json() == {"error": "authentication required"}
    assert none.headers["www-authenticate"] == 'Bearer realm="asya-gateway"'
    wrong = httpx.post(f"{url}/mcp", json=ping, headers={"X-API-Key": "wrong"}, timeout=10)
    assert wrong.status_code == 401 and wrong.json() == {"error": "invalid credentials"}
    a2a = httpx.post(f"{url}/a2a/", json=ping, headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert a2a.status_code == 401
    assert a2a.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32005, "message": "Authentication required"}}
    bearer = httpx.post(f"{url}/mcp", json=ping, headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert bearer.status_code == 200 and "mcp-session-id" in bearer.headers

    async def sdk_without_key() -> None:
        async with mcp_session(url, {}):
            pass

    with pytest.raises(BaseExceptionGroup) as info:  # the SDK reports the 401 as a failed initialize
        asyncio.run(sdk_without_key())
    assert info.group_contains(MCPError)


# -- CLI ------------------------------------------------------------------------------------------------------


def _cli(*argv: str, url: str, key: str | None = KEY) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"ASYA_URL": url} if key is None else {"ASYA_URL": url, "ASYA_API_KEY": key}
    return main(list(argv), env=env, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_cli_mcp_list_and_a2a_card(agents_mesh: LocalMesh) -> None:
    code, out, _ = _cli("mcp", "list", url=agents_mesh.url)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["doomed", "slow", "text-pipeline"]
    assert "Normalize, analyze and summarize a text" in out
    code, out, _ = _cli("a2a", "card", url=agents_mesh.url, key=None)  # the card is public
    assert code == 0 and json.loads(out)["name"] == "Agents E2E"
    code, _, err = _cli("mcp", "list", url=agents_mesh.url, key="wrong")
    assert code == 2 and "invalid credentials" in err


def test_cli_mcp_call_shows_progress_and_fly_then_prints_the_result(agents_mesh: LocalMesh) -> None:
    code, out, err = _cli("mcp", "call", "text-pipeline", "--args", '{"text": "Hello World"}', url=agents_mesh.url)
    assert code == 0, err
    result = json.loads(out)
    assert result["summary"].startswith("A positive text of 2 words")
    lines = err.splitlines()
    # the progress bar (not a TTY: one line a change it sees) ends at 100%
    assert any(re.match(r"\[#{24}\] 100\.0%", line) for line in lines), lines
    assert any(line.startswith("A positive") for line in lines)  # the FLY text, streamed as text (issue 20)
    assert lines[-1].startswith("task: ")
    code, out, err = _cli("mcp", "call", "doomed", "--args", '{"text": "x"}', url=agents_mesh.url)
    assert code == 1 and out.strip() == "cannot process 'x'"
    code, _, err = _cli("mcp", "call", "nope", url=agents_mesh.url)
    assert code == 2 and "unknown tool: nope" in err
    code, _, err = _cli("mcp", "call", "slow", "--args", "[1]", url=agents_mesh.url)
    assert code == 2 and "must be a JSON object" in err


def test_mcp_sdk_auto_mode_adopts_2026_07_28_by_discover_gw_mcp_1(local_mesh: LocalMesh) -> None:
    """The ``mcp`` 2.x high-level client probes the 2026-07-28 ``server/discover`` first and adopts it (more on that
    era in test_local_mcp_modern.py; the example mesh's ``iam`` mode is not enforced locally, so the client needs no
    credentials)."""

    async def run() -> tuple[str | None, list[str], Any]:
        async with Client(f"{local_mesh.url}/mcp") as client:
            tools = await client.list_tools()
            result = await client.call_tool("text-pipeline", {"text": "Auto mode works."})
            return client.protocol_version, [tool.name for tool in tools.tools], result

    version, names, result = asyncio.run(run())
    assert version == "2026-07-28"
    assert names == ["sentences", "text-pipeline"]
    assert result.is_error is False
    assert re.match(r"A \w+ text of 3 words", result.structured_content["summary"])


def test_mcp_call_of_a_task_canceled_meanwhile_is_a_tool_error_gw_mcp_7(agents_mesh: LocalMesh) -> None:
    """The task of a running tool call is canceled over REST (DELETE): the call answers ``task was canceled``."""
    marker = str(uuid.uuid4())

    def running_task() -> str | None:
        page = httpx.get(f"{agents_mesh.url}/api/v1/mesh/", params={"flow": "slow"}, headers=AUTH, timeout=60)
        for summary in page.json()["messages"]:
            view = httpx.get(f"{agents_mesh.url}/api/v1/mesh/{summary['id']}", headers=AUTH, timeout=60).json()
            if view["payload"].get("marker") == marker and view["status"] == "running":
                return str(view["id"])
        return None

    def cancel_when_running() -> str:
        task_id: str = wait_for(running_task, "the tool call's task to run", limit=120)
        deleted = httpx.delete(f"{agents_mesh.url}/api/v1/mesh/{task_id}", headers=AUTH, timeout=60)
        assert deleted.status_code == 204
        return task_id

    async def run() -> tuple[Any, str]:
        async with mcp_session(agents_mesh.url) as session:
            # the handler runs long enough that a loaded machine still finds it running: the test waits for the
            # running status, not for a clock
            call = asyncio.ensure_future(session.call_tool("slow", {"seconds": 20, "marker": marker}))
            canceled = await asyncio.to_thread(cancel_when_running)
            return await call, canceled

    result, task_id = asyncio.run(run())
    assert result.is_error is True
    assert result.content[0].text == "task was canceled"
    assert result.meta["asya/task_id"] == task_id
