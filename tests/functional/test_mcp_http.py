"""HTTP-level behaviour of ``/mcp`` over real HTTP (uvicorn) against in-process moto (issue 17).

What a client that leaves a ``tools/call`` before its answer means (GW-CANCEL-1), for a call answered as one JSON
response (no ``text/event-stream`` in ``Accept``), which notices the close at its keepalive ticks: at ``2026-07-28``
closing the response is the protocol's cancel, so the task is canceled; in the handshake era it is not (only
``notifications/cancelled`` is), so the task runs on. No actor runs here: a task stays ``pending`` unless canceled.
And the CORS preflight for the headers a ``2026-07-28`` browser client sends."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya_gateway import GatewayConfig, create_app
from asya_gateway.mcp import call_task_id
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

MODERN = "2026-07-28"
CONFIG = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=0.05, sse_keepalive=0.1, sse_max_seconds=10)


@pytest.fixture
def base_url(mesh: Any, serve_asgi: Any) -> str:
    clock = ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))
    store = mesh.store(clock)
    app = create_app(CONFIG, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    url: str = serve_asgi(app)
    return url


def _leave(url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    """POST the call and hang up before the answer (a read timeout closes the connection)."""
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}/mcp", json=body, headers={"Accept": "application/json", **headers}, timeout=0.5)


def _status_after(url: str, task_id: str, seconds: float = 3.0) -> str:
    deadline = time.monotonic() + seconds
    status = ""
    while time.monotonic() < deadline:
        status = str(httpx.get(f"{url}/api/v1/mesh/{task_id}").json()["status"])
        if status == "canceled":
            break
        time.sleep(0.05)
    return status


def test_gw_cancel_1_a_2026_client_that_closes_a_json_call_cancels_its_task(base_url: str) -> None:
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    call = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"_meta": envelope, "name": "text-pipeline", "arguments": {"text": "leaving"}},
    }
    _leave(base_url, call, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "text-pipeline"})
    page = httpx.get(f"{base_url}/api/v1/mesh/", params={"flow": "text-pipeline"}).json()["messages"]
    assert len(page) == 1
    assert _status_after(base_url, page[0]["id"]) == "canceled"


def test_gw_cancel_1_a_handshake_era_client_that_closes_a_call_leaves_its_task_running(base_url: str) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    session = httpx.post(f"{base_url}/mcp", json=init).headers["mcp-session-id"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "text-pipeline", "arguments": {"text": "leaving"}},
    }
    _leave(base_url, call, {"Mcp-Session-Id": session})
    assert _status_after(base_url, call_task_id(session, 2), seconds=1.0) == "pending"


def test_gw_mcp_9_a_browser_may_send_the_2026_routing_headers(mesh: Any, serve_asgi: Any) -> None:
    """With ``gateway.cors_origins`` set, a preflight for the headers every 2026-07-28 request carries is allowed."""
    gateway = mesh.manifest.gateway.model_copy(update={"cors_origins": ["https://app.example.com"]})
    manifest = mesh.manifest.model_copy(update={"gateway": gateway})
    app = create_app(CONFIG, manifest=manifest, dynamodb=mesh.aws.dynamodb, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    asked = "mcp-protocol-version, mcp-method, mcp-name, content-type"
    with httpx.Client(base_url=serve_asgi(app), timeout=10) as client:
        preflight = client.options(
            "/mcp",
            headers={
                "Origin": "https://app.example.com",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
    assert preflight.status_code == 200, preflight.text
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"mcp-protocol-version", "mcp-method", "mcp-name"} <= allowed
