"""MCP protocol ``2026-07-28`` (the per-request era) and the cancel of a tool call, against a local mesh over HTTP
with the ``mcp`` 2.x SDK's own client (GATEWAY section 11, GW-MCP-1..9, GW-CANCEL-1; issue 17).

The SDK's ``Client`` probes ``server/discover`` and adopts ``2026-07-28``: every request then carries its envelope in
``_meta`` and no session. ``mode="legacy"`` pins the same client to the handshake era (``2025-11-25``), which must
keep working, including its cancel (``notifications/cancelled`` as a separate POST). The mesh is
tests/e2e/agents/asya.yaml (``api_key`` auth)."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from asya.manifest import load_manifest
from asya_gateway.mcp import call_task_id
from asya_local.mesh import LocalMesh
from tests.e2e.conftest import E2E_DIR

pytestmark = pytest.mark.e2e

KEY = "e2e-mcp-modern-key"
AUTH = {"X-API-Key": KEY}
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def mesh() -> Iterator[LocalMesh]:
    manifest = load_manifest(E2E_DIR / "agents" / "asya.yaml")
    with LocalMesh(manifest, port=0, gateway_env={"ASYA_API_KEYS": KEY}) as running:
        yield running


@asynccontextmanager
async def sdk_client(url: str, headers: dict[str, str] | None = None, **kwargs: Any) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers=AUTH if headers is None else headers)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http), **kwargs) as client:
        yield client


def _task(mesh: LocalMesh, task_id: str) -> dict[str, Any]:
    answer = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", headers=AUTH, timeout=60)
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()
    return view


def _wait_status(mesh: LocalMesh, task_id: str, status: str, *, seconds: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    view = _task(mesh, task_id)
    while view["status"] != status and time.monotonic() < deadline:
        time.sleep(0.1)
        view = _task(mesh, task_id)
    assert view["status"] == status, view
    return view


def _task_with(mesh: LocalMesh, marker: str, *, statuses: tuple[str, ...] = ("running",), seconds: float = 90) -> str:
    """The id of the ``slow`` task whose payload carries ``marker``, once its status is one of ``statuses``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page = httpx.get(f"{mesh.url}/api/v1/mesh/", params={"flow": "slow"}, headers=AUTH, timeout=60).json()
        for summary in page["messages"]:
            view = _task(mesh, summary["id"])
            if view["payload"].get("marker") == marker and view["status"] in statuses:
                return str(view["id"])
        time.sleep(0.1)
    raise AssertionError(f"no task with marker {marker} is {statuses}")


# -- 2026-07-28 -----------------------------------------------------------------------------------------------


def test_gw_mcp_1_the_sdk_client_negotiates_2026_07_28_and_lists_tools_gw_mcp_5(mesh: LocalMesh) -> None:
    async def run() -> tuple[str, Any, list[Any]]:
        async with sdk_client(mesh.url) as client:
            tools = await client.list_tools()
            return client.protocol_version, client.server_info, tools.tools

    version, server, tools = asyncio.run(run())
    assert version == MODERN
    assert server is not None and server.name == "asya-gateway"
    assert [tool.name for tool in tools] == ["doomed", "slow", "text-pipeline"]
    assert tools[2].input_schema["required"] == ["text"]


def test_gw_mcp_9_a_2026_call_streams_progress_and_fly_in_order_gw_mcp_7(mesh: LocalMesh) -> None:
    """FLY values come only with the era's per-request log opt-in (``Client(log_level="info")``)."""
    seen: list[tuple[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(("progress", (progress, total, message)))

    async def on_log(params: Any) -> None:
        seen.append(("fly", params))

    async def run() -> tuple[str, Any]:
        async with sdk_client(mesh.url, logging_callback=on_log, log_level="info") as client:
            text = "Hello World. Have a nice day."
            result = await client.call_tool("text-pipeline", {"text": text}, progress_callback=on_progress)
            return client.protocol_version, result

    version, result = asyncio.run(run())
    assert version == MODERN
    assert result.is_error is False
    summary = result.structured_content["summary"]
    assert summary.startswith("A positive text of 6 words")
    task_id = result.meta["asya/task_id"]
    assert _task(mesh, task_id)["status"] == "succeeded"
    percents = [value[0] for kind, value in seen if kind == "progress"]
    assert percents == sorted(set(percents)) and percents[-1] == 100.0
    messages = [value[2] for kind, value in seen if kind == "progress"]
    assert all(re.fullmatch(r"(normalize|analyze|summarize): \w+", m or "") for m in messages), messages
    fly = [value for kind, value in seen if kind == "fly"]
    assert {(p.level, p.logger) for p in fly} == {("info", "asya.fly")}
    assert "".join(p.data["payload"] for p in fly) == summary  # every value, in order
    kinds = [kind for kind, _ in seen]
    last_fly = len(kinds) - 1 - kinds[::-1].index("fly")
    assert all(v[0] < 100 for k, v in seen[:last_fly] if k == "progress")  # no FLY after the 100% notification


def test_gw_mcp_9_without_the_log_opt_in_a_2026_call_sends_no_fly(mesh: LocalMesh) -> None:
    fly: list[Any] = []

    async def on_log(params: Any) -> None:
        fly.append(params)

    async def run() -> Any:
        async with sdk_client(mesh.url, logging_callback=on_log) as client:
            return await client.call_tool("slow", {"seconds": 2})

    result = asyncio.run(run())
    assert result.is_error is False and result.structured_content == {"seconds": 2, "lingered": True}
    assert fly == []


def test_gw_mcp_7_a_failing_task_unknown_tool_and_bad_arguments_at_2026_gw_mcp_6(mesh: LocalMesh) -> None:
    async def run() -> tuple[Any, Any, list[MCPError]]:
        async with sdk_client(mesh.url) as client:
            failed = await client.call_tool("doomed", {"text": "boom"})
            invalid = await client.call_tool("text-pipeline", {"text": ""})
            errors = []
            for name in ("no-such-tool", "internal"):
                with pytest.raises(MCPError) as info:
                    await client.call_tool(name, {})
                errors.append(info.value)
            return failed, invalid, errors

    failed, invalid, errors = asyncio.run(run())
    assert failed.is_error is True and failed.content[0].text == "cannot process 'boom'"
    assert _task(mesh, failed.meta["asya/task_id"])["status"] == "failed"
    assert invalid.is_error is True and invalid.content[0].text.startswith("invalid arguments: $.text: ")
    assert [(e.error.code, e.error.message) for e in errors] == [
        (-32602, "unknown tool: no-such-tool"),
        (-32602, "unknown tool: internal"),
    ]


def test_gw_auth_7_a_2026_client_without_or_with_a_wrong_key_is_refused(mesh: LocalMesh) -> None:
    async def connect(headers: dict[str, str]) -> None:
        async with sdk_client(mesh.url, headers, mode=MODERN) as client:
            await client.list_tools()

    for headers in ({}, {"X-API-Key": "wrong"}):
        with pytest.raises(BaseExceptionGroup) as info:  # the SDK reports the 401 as the failed request
            asyncio.run(connect(headers))
        assert info.group_contains(MCPError)
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    refused = httpx.post(f"{mesh.url}/mcp", json=body, headers=headers, timeout=60)
    assert refused.status_code == 401 and refused.json() == {"error": "authentication required"}
    bearer = httpx.post(f"{mesh.url}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {KEY}"})
    assert bearer.status_code == 200 and "mcp-session-id" not in bearer.headers


def test_gw_mcp_3_the_2026_envelope_is_checked_over_raw_json_rpc(mesh: LocalMesh) -> None:
    url = f"{mesh.url}/mcp"
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def post(method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
        sent = {**AUTH, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **headers}
        return httpx.post(url, json=body, headers=sent, timeout=30)

    discover = post("server/discover", {"_meta": envelope})
    assert discover.status_code == 200 and "mcp-session-id" not in discover.headers
    result = discover.json()["result"]
    assert result["supportedVersions"] == [MODERN] and result["resultType"] == "complete"
    assert result["capabilities"] == {"tools": {"listChanged": False}, "logging": {}}
    assert result["cacheScope"] == "private" and result["ttlMs"] == 300_000
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "asya-gateway"
    not_object = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]},
        headers={**AUTH, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
        timeout=10,
    )
    assert not_object.status_code == 400 and not_object.json()["error"]["code"] == -32602
    missing = post("tools/list", {})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32602
    assert "io.modelcontextprotocol/clientCapabilities" in missing.json()["error"]["message"]
    mismatch = post("tools/list", {"_meta": envelope}, **{"Mcp-Method": "tools/call"})
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
    name = post("tools/call", {"_meta": envelope, "name": "slow"}, **{"Mcp-Name": "doomed"})
    assert name.status_code == 400 and name.json()["error"]["code"] == -32020
    future = {**envelope, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    unsupported = post("tools/list", {"_meta": future}, **{"MCP-Protocol-Version": "2099-01-01"})
    assert unsupported.status_code == 400
    assert unsupported.json()["error"] == {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {
            "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
            "requested": "2099-01-01",
        },
    }
    for removed in ("ping", "initialize", "logging/setLevel"):
        gone = post(removed, {"_meta": envelope})
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32601, removed
    bad_level = post(
        "tools/call",
        {"_meta": {**envelope, "io.modelcontextprotocol/logLevel": "loud"}, "name": "slow"},
        **{"Mcp-Name": "slow"},
    )
    assert (
        bad_level.status_code == 400 and "logLevel must be one of debug, info" in bad_level.json()["error"]["message"]
    )
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    assert httpx.post(url, json=note, headers={**AUTH, "MCP-Protocol-Version": MODERN}).status_code == 202
    plain = post("tools/call", {"_meta": envelope, "name": "slow", "arguments": {"seconds": 1}}, **{"Mcp-Name": "slow"})
    assert plain.headers["content-type"].startswith("application/json")  # no text/event-stream in Accept
    answer = plain.json()["result"]
    assert answer["resultType"] == "complete" and answer["structuredContent"] == {"seconds": 1, "lingered": True}
    assert set(answer["_meta"]) == {"asya/task_id", "io.modelcontextprotocol/serverInfo"}


# -- cancel ---------------------------------------------------------------------------------------------------


def test_gw_cancel_1_canceling_a_2026_call_cancels_its_task(mesh: LocalMesh) -> None:
    """At 2026-07-28 the SDK client cancels by closing the call's response stream (no notification exists over
    HTTP); the gateway cancels the task as ``DELETE /api/v1/mesh/{id}`` would."""
    marker = str(uuid.uuid4())

    async def run() -> str:
        async with sdk_client(mesh.url) as client:
            assert client.protocol_version == MODERN
            call = asyncio.ensure_future(client.call_tool("slow", {"seconds": 20, "marker": marker}))
            task_id = await asyncio.to_thread(_task_with, mesh, marker)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return task_id

    task_id = asyncio.run(run())
    view = _wait_status(mesh, task_id, "canceled")
    assert view["status"] == "canceled"


def test_gw_cancel_1_a_2026_call_cut_by_a_gateway_restart_is_not_a_cancel(mesh: LocalMesh, tmp_path: Path) -> None:
    """The stream a stopping gateway cuts (``asya_gateway.drain``, then the server's shutdown) is not the client
    closing it: the task runs on and succeeds. The actor holds the task running until the test opens its gate, after
    the cut: the restart always falls while the task runs, and the test never waits longer than that."""
    marker = str(uuid.uuid4())
    gate = tmp_path / "gate"
    arguments = {"seconds": 1, "marker": marker, "gate": str(gate)}

    async def run() -> str:
        async with sdk_client(mesh.url) as client:
            call = asyncio.ensure_future(client.call_tool("slow", arguments))
            task_id = await asyncio.to_thread(_task_with, mesh, marker)
            await asyncio.to_thread(mesh.restart_gateway, grace_seconds=0)
            with pytest.raises(Exception):  # noqa: B017 (the SDK's error for a cut stream is not ours to pin)
                await asyncio.wait_for(call, 60)
            return task_id

    task_id = asyncio.run(run())
    gate.touch()
    view = _wait_status(mesh, task_id, "succeeded")
    assert view["result"] == {**arguments, "lingered": True}


def test_gw_cancel_1_a_legacy_call_is_canceled_by_notifications_cancelled(mesh: LocalMesh) -> None:
    """Pinned to the handshake era (``2025-11-25``), the SDK client POSTs ``notifications/cancelled`` with the request
    id when the caller gives up (here: its read timeout); that POST carries no task id, yet cancels the call's task."""
    marker = str(uuid.uuid4())

    async def run() -> tuple[str, Any]:
        async with sdk_client(mesh.url, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            with pytest.raises(MCPError) as info:
                await client.call_tool("slow", {"seconds": 20, "marker": marker}, read_timeout_seconds=2.5)
            return await asyncio.to_thread(_task_with, mesh, marker, statuses=("running", "canceled")), info.value

    task_id, error = asyncio.run(run())
    assert "timed out" in error.error.message
    assert _wait_status(mesh, task_id, "canceled")["status"] == "canceled"


def test_gw_cancel_1_a_legacy_call_whose_connection_drops_runs_on(mesh: LocalMesh) -> None:
    """In the handshake era a dropped connection is not a cancel (only the notification is): the task finishes."""
    url = f"{mesh.url}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    session = httpx.post(url, json=init, headers=AUTH, timeout=60).headers["mcp-session-id"]
    headers = {**AUTH, "Mcp-Session-Id": session, "Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 3}}}
    with httpx.stream("POST", url, json=call, headers=headers, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
    task_id = call_task_id(session, 9)  # the task of request 9 in this session (asya_gateway.mcp.cancel)
    assert _task(mesh, task_id)["status"] != "canceled"  # it may have ended already on a slow box
    assert _wait_status(mesh, task_id, "succeeded")["result"] == {"seconds": 3, "lingered": True}
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    late = httpx.post(url, json=note, headers={**AUTH, "Mcp-Session-Id": session}, timeout=60)
    assert late.status_code == 202  # a cancel after the end changes nothing
    assert _task(mesh, task_id)["status"] == "succeeded"
    stranger = httpx.post(url, json=note, headers={**AUTH, "Mcp-Session-Id": str(uuid.uuid4())}, timeout=60)
    assert stranger.status_code == 404  # a cancel needs the call's live session


def test_gw_mcp_1_a_raw_2025_06_18_client_still_calls_a_tool(mesh: LocalMesh) -> None:
    url = f"{mesh.url}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    answer = httpx.post(url, json=init, headers=AUTH, timeout=60)
    assert answer.json()["result"]["protocolVersion"] == "2025-06-18"
    headers = {**AUTH, "Mcp-Session-Id": answer.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}}
    result = httpx.post(url, json=call, headers=headers, timeout=30).json()["result"]
    assert result["isError"] is False and "resultType" not in result
    assert result["_meta"] == {"asya/task_id": call_task_id(answer.headers["mcp-session-id"], 2)}
