"""Gateway pieces of the agent protocols against in-process moto: MCP sessions with their sliding expiry
(GW-MCP-2, GW-DATA-2) and a task creation that fails (GW-MCP-6, GW-CREATE-8)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from asya_gateway.mcp.sessions import SESSION_TTL_SECONDS, SessionStore
from tests.asgi import asgi_client
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

FAST = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=0.05)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))


@pytest.fixture
def store(mesh: Any, clock: ManualClock) -> TaskStore:
    store: TaskStore = mesh.store(clock)
    return store


def _ttl(mesh: Any, session_id: str) -> int:
    item = mesh.aws.dynamodb.get_item(
        TableName=mesh.resources.table, Key={"pk": {"S": f"MCPSESSION#{session_id}"}, "sk": {"S": "SESSION"}}
    )["Item"]
    return int(item["ttl"]["N"])


def test_gw_mcp_2_sessions_slide_their_24_h_expiry(mesh: Any, store: TaskStore, clock: ManualClock) -> None:
    sessions = SessionStore(store, clock)
    session = sessions.create("2025-06-18")
    start = int(clock().timestamp())
    assert _ttl(mesh, session.id) == start + SESSION_TTL_SECONDS
    clock.advance(minutes=30)
    assert sessions.get(session.id) == session
    assert _ttl(mesh, session.id) == start + SESSION_TTL_SECONDS  # under an hour of use: no write
    clock.advance(hours=2)
    assert sessions.get(session.id) is not None
    assert _ttl(mesh, session.id) == int(clock().timestamp()) + SESSION_TTL_SECONDS  # pushed forward
    sessions.set_log_level(session.id, "error")
    assert sessions.get(session.id).log_level == "error"  # type: ignore[union-attr]
    clock.advance(hours=24)
    assert sessions.get(session.id) is None  # expired though moto never deletes the item (GW-DATA-5)
    other = sessions.create("2025-11-25")
    sessions.delete(other.id)
    assert sessions.get(other.id) is None
    sessions.set_log_level(other.id, "debug")  # a deleted session is not written back
    assert sessions.get(other.id) is None
    assert sessions.get("x" * 200) is None


def test_gw_mcp_2_an_expired_session_answers_404_over_http(mesh: Any, store: TaskStore, clock: ManualClock) -> None:
    app = create_app(FAST, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app) as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}
        answer = client.post("/mcp", json=init)
        assert answer.json()["result"]["protocolVersion"] == "2025-03-26"
        headers = {"Mcp-Session-Id": answer.headers["mcp-session-id"]}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert client.post("/mcp", json=ping, headers=headers).status_code == 200
        clock.advance(hours=24, seconds=1)
        expired = client.post("/mcp", json=ping, headers=headers)
        assert expired.status_code == 404
        assert expired.json() == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32600, "message": "session not found or expired: initialize again"},
        }


def _call_text_pipeline(client: httpx.Client, version: str) -> dict[str, Any]:
    """``initialize`` a session at ``version``, then ``tools/call`` text-pipeline on it: the call's result."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": version}}
    headers = {"Mcp-Session-Id": client.post("/mcp", json=init).headers["mcp-session-id"]}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "text-pipeline", "arguments": {"text": "hi"}},
    }
    result: dict[str, Any] = client.post("/mcp", json=call, headers=headers).json()["result"]
    return result


def test_gw_mcp_6_a_creation_failure_is_a_tool_error(mesh: Any, store: TaskStore, clock: ManualClock) -> None:
    """The flow's first queue is gone: the task is removed again (GW-CREATE-8) and the call answers
    ``dispatch failed: ...`` with ``isError`` (GW-MCP-6); A2A answers -32603 with the same reason."""
    sqs = mesh.aws.sqs
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="asya-demo-normalize")["QueueUrl"])
    app = create_app(FAST, manifest=mesh.manifest, store=store, sqs=sqs, clock=clock)
    with asgi_client(app) as client:
        result = _call_text_pipeline(client, "2025-11-25")
        assert result == {
            "content": [{"type": "text", "text": "dispatch failed: actor not found: normalize"}],
            "isError": True,
        }
        message = {
            "kind": "message",
            "role": "user",
            "messageId": "m",
            "parts": [{"kind": "data", "data": {"text": "hi"}}],
        }
        send = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "message/send",
            "params": {"message": message, "metadata": {"skill": "text-pipeline"}},
        }
        error = client.post("/a2a/", json=send).json()["error"]
        assert error == {"code": -32603, "message": "dispatch failed: actor not found: normalize"}


def test_gw_mcp_8_gw_a2a_8_waits_end_at_the_long_response_limit(
    mesh: Any, store: TaskStore, clock: ManualClock
) -> None:
    """No actor runs here, so the task stays ``pending``: the MCP call answers the timeout result and A2A's blocking
    send the Task as it is, once the limit (840 s deployed, 0.3 s here) has passed."""
    config = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=0.05, sse_max_seconds=0.3)
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app, timeout=10) as client:
        result = _call_text_pipeline(client, "2025-06-18")
        task_id = result["_meta"]["asya/task_id"]
        assert result["isError"] is True
        assert result["content"] == [
            {"type": "text", "text": f"timeout: no result received (task {task_id} is pending)"}
        ]
        message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"text": "hi"}}]}
        send = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendMessage",
            "params": {"message": message, "metadata": {"skill": "text-pipeline"}},
        }
        task = client.post("/a2a/", json=send).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert task["metadata"]["asya"]["flow"] == "text-pipeline"
