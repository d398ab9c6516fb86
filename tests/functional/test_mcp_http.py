"""HTTP-level behaviour of ``/mcp`` over real HTTP (uvicorn) against in-process moto (issue 17).

What a client that leaves a ``tools/call`` before its answer means (GW-CANCEL-1), for a call answered as one JSON
response (no ``text/event-stream`` in ``Accept``), which notices the close at its keepalive ticks: at ``2026-07-28``
closing the response is the protocol's cancel, so the task is canceled; in the handshake era it is not (only
``notifications/cancelled`` is), so the task runs on. No actor runs here: a task stays ``pending`` unless canceled.
And the CORS preflight for the headers a ``2026-07-28`` browser client sends."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from asya_gateway import GatewayConfig, create_app
from asya_gateway.mcp import call_task_id
from tests.asgi import asgi_client
from tests.clocks import ManualClock
from tests.waiting import wait_for

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


def _leave(url: str, body: dict[str, Any], headers: dict[str, str], *, task_exists: Callable[[], Any]) -> None:
    """POST the call over a raw connection, wait until its task exists, then hang up before the answer."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: {parts.netloc}",
        "Content-Type: application/json",
        "Accept: application/json",
        f"Content-Length: {len(data)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    with socket.create_connection((str(parts.hostname), int(parts.port or 80)), timeout=60) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        wait_for(task_exists, "the call's task to be created")


def _listed(url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = httpx.get(f"{url}/api/v1/mesh/", params={"flow": "text-pipeline"}).json()[
        "messages"
    ]
    return messages


def _status(url: str, task_id: str) -> str:
    return str(httpx.get(f"{url}/api/v1/mesh/{task_id}").json()["status"])


def test_gw_cancel_1_a_2026_client_that_closes_a_json_call_cancels_its_task(base_url: str) -> None:
    envelope = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    call = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"_meta": envelope, "name": "text-pipeline", "arguments": {"text": "leaving"}},
    }
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "text-pipeline"}
    _leave(base_url, call, headers, task_exists=lambda: _listed(base_url))
    page = _listed(base_url)
    assert len(page) == 1
    wait_for(lambda: _status(base_url, page[0]["id"]) == "canceled", "the left call's task to be canceled")


def test_gw_cancel_1_a_handshake_era_client_that_closes_a_call_leaves_its_task_running(base_url: str) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    session = httpx.post(f"{base_url}/mcp", json=init).headers["mcp-session-id"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "text-pipeline", "arguments": {"text": "leaving"}},
    }
    task_id = call_task_id(session, 2)
    exists = lambda: httpx.get(f"{base_url}/api/v1/mesh/{task_id}").status_code == 200  # noqa: E731
    _leave(base_url, call, {"Mcp-Session-Id": session}, task_exists=exists)
    # the call notices the close at its next keepalive tick (0.1 s here); a second later the task still waits
    time.sleep(1.0)
    assert _status(base_url, task_id) == "pending"


def test_gw_mcp_9_a_browser_may_send_the_2026_routing_headers(mesh: Any) -> None:
    """With ``gateway.cors_origins`` set, a preflight for the headers every 2026-07-28 request carries is allowed."""
    gateway = mesh.manifest.gateway.model_copy(update={"cors_origins": ["https://app.example.com"]})
    manifest = mesh.manifest.model_copy(update={"gateway": gateway})
    app = create_app(CONFIG, manifest=manifest, dynamodb=mesh.aws.dynamodb, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    asked = "mcp-protocol-version, mcp-method, mcp-name, content-type"
    with asgi_client(app, timeout=10) as client:
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
