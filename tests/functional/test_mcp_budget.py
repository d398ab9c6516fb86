"""The DynamoDB cost of an MCP ``tools/call`` against the REST create of the same flow (issue 17's budget, GATEWAY
GW-DATA-8, GW-MCP-6): the MCP layer adds no write to a call, in either era, and the cancel of a handshake-era call
(``notifications/cancelled``) costs one conditional update and nothing before it.

The meter (``bench.meter``, with shadow reads so write units are exact) bills every call of the store's DynamoDB
client. No actor runs here, so each task stays ``pending`` and a call answers its timeout result after the wait limit
(0.3 s): what is billed is the creation and the wait, the part MCP could add to.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from asya_gateway.mcp import call_task_id
from bench.meter import WRITE_OPERATIONS, Meter
from tests.asgi import asgi_client
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

MODERN = "2026-07-28"
CONFIG = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=0.05, sse_max_seconds=0.3)
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def metered(mesh: Any) -> Iterator[tuple[httpx.Client, Meter]]:
    dynamodb = mesh.aws.session.client("dynamodb")
    meter = Meter(shadow_dynamodb=mesh.aws.dynamodb)
    meter.attach(dynamodb)
    clock = ManualClock(datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC))
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=dynamodb, s3=mesh.aws.s3, clock=clock
    )
    app = create_app(CONFIG, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app, timeout=30) as client:
        yield client, meter


def _writes(meter: Meter) -> tuple[dict[str, int], int]:
    """DynamoDB write requests by operation, and their write units, since the last reset."""
    requests: dict[str, int] = {}
    units = 0
    for (_, service, operation), usage in meter.snapshot().items():
        if service == "dynamodb" and operation in WRITE_OPERATIONS:
            requests[operation] = requests.get(operation, 0) + usage.requests
            units += usage.wru
    return requests, units


def _call(name: str, request_id: int, *, modern: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": "Hello World"}}
    if modern:
        params["_meta"] = ENVELOPE
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_gw_data_8_a_tools_call_writes_what_a_rest_create_writes_in_both_eras(
    metered: tuple[httpx.Client, Meter],
) -> None:
    client, meter = metered
    meter.reset()
    created = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "Hello World"}})
    assert created.status_code == 201
    rest = _writes(meter)
    assert rest[1] > 0  # the meter sees the creation

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    session = client.post("/mcp", json=init).headers["mcp-session-id"]
    meter.reset()
    legacy = client.post("/mcp", json=_call("text-pipeline", 2, modern=False), headers={"Mcp-Session-Id": session})
    assert legacy.json()["result"]["_meta"]["asya/task_id"] == call_task_id(session, 2)
    assert _writes(meter) == rest

    meter.reset()
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "text-pipeline"}
    modern = client.post("/mcp", json=_call("text-pipeline", 3, modern=True), headers=headers)
    assert modern.json()["result"]["resultType"] == "complete"
    assert _writes(meter) == rest


def test_gw_cancel_1_a_cancel_notification_costs_one_conditional_update(metered: tuple[httpx.Client, Meter]) -> None:
    client, meter = metered
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    session = client.post("/mcp", json=init).headers["mcp-session-id"]
    headers = {"Mcp-Session-Id": session}
    client.post("/mcp", json=_call("text-pipeline", 7, modern=False), headers=headers)
    task_id = call_task_id(session, 7)
    meter.reset()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "stop"}}
    assert client.post("/mcp", json=note, headers=headers).status_code == 202
    requests, _ = _writes(meter)
    assert requests == {"UpdateItem": 1}
    assert client.get(f"/api/v1/mesh/{task_id}").json()["status"] == "canceled"
    # malformed: nothing is written; naming no call: the conditional update fails on the missing task
    for odd, cost in (({"requestId": True}, {}), ({}, {}), ({"requestId": "never-sent"}, {"UpdateItem": 1})):
        meter.reset()
        quiet = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": odd}
        assert client.post("/mcp", json=quiet, headers=headers).status_code == 202
        assert _writes(meter)[0] == cost, odd
    assert client.get(f"/api/v1/mesh/{call_task_id(session, 'never-sent')}").status_code == 404
    missing = client.post("/mcp", json=note)
    assert missing.status_code == 400 and missing.json()["error"]["message"] == "Mcp-Session-Id header required"
