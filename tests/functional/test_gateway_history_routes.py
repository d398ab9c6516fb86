"""The gateway's retry and redrive routes against moto (R3): ``POST /api/v1/mesh/{id}/retry`` without a step (the
console's Retry button, GW-HIST-2), its refusals, and ``POST /api/v1/system/dlq/{actor}/redrive`` (the console's
Redrive button, GW-DLQ-1). The recorded-step retry runs end to end in tests/e2e/test_local_task_commands.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.store import StatusUpdate
from asya_gateway import GatewayConfig, create_app
from tests.asgi import asgi_client
from tests.clocks import ManualClock
from tests.functional.test_gateway_tasks import START

pytestmark = pytest.mark.functional


@pytest.fixture
def client(mesh: Any) -> Iterator[httpx.Client]:
    clock = ManualClock(START)
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=mesh.store(clock), sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app) as http:
        yield http


def _receive(mesh: Any, actor: str) -> list[dict[str, Any]]:
    url = mesh.resources.queue_urls[actor]
    messages = mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_gw_hist_2_retry_of_a_failed_task_starts_over_linked_by_retry_of(client: httpx.Client, mesh: Any) -> None:
    created = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "again"}}).json()
    _receive(mesh, "normalize")
    busy = client.post(f"/api/v1/mesh/{created['id']}/retry", json={})
    assert busy.status_code == 409 and busy.json()["error"].endswith(
        "retry a task once it has ended (or cancel it first)"
    )
    mesh.store(ManualClock(START)).apply_status(created["id"], StatusUpdate(status="failed", error="boom"))
    response = client.post(f"/api/v1/mesh/{created['id']}/retry", json={})
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["retry_of"] == created["id"] and answer["id"] != created["id"] and "from" not in answer
    [envelope] = _receive(mesh, "normalize")
    assert (envelope["id"], envelope["payload"], envelope["headers"]["retry_of"]) == (answer["id"], {"text": "again"},
        created["id"])  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"form": "1"}, 400, "unknown field 'form' (fields: from, timeout)"),
        ({"timeout": 0}, 400, "timeout: a whole number of seconds >= 1, got 0"),
        ({"from": "a b"}, 400, "--from: 'a b' is not a step: give a hop index"),
    ],
)
def test_gw_hist_2_bad_retry_bodies_name_the_field(
    client: httpx.Client, mesh: Any, body: dict[str, Any], status: int, message: str
) -> None:
    created = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "x"}}).json()
    mesh.store(ManualClock(START)).apply_status(created["id"], StatusUpdate(status="failed", error="boom"))
    response = client.post(f"/api/v1/mesh/{created['id']}/retry", json=body)
    assert response.status_code == status and response.json()["error"].startswith(message), response.text


def test_gw_hist_1_history_of_a_flow_without_it_and_of_an_unknown_task_is_404(client: httpx.Client) -> None:
    created = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "x"}}).json()
    response = client.get(f"/api/v1/mesh/{created['id']}/history")
    assert response.status_code == 404 and "set history: steps on the flow" in response.json()["error"]
    assert client.get("/api/v1/mesh/nope/history").status_code == 404
    assert client.post("/api/v1/mesh/nope/retry", json={}).status_code == 404


def test_gw_dlq_1_redrive_moves_dlq_messages_back_to_the_actors_queue(client: httpx.Client, mesh: Any) -> None:
    sqs = mesh.aws.sqs
    dlq_url = sqs.get_queue_url(QueueName="asya-demo-analyze-dlq")["QueueUrl"]
    for index in range(3):
        sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps({"n": index}))
    response = client.post("/api/v1/system/dlq/analyze/redrive", json={"limit": 2})
    assert response.status_code == 200, response.text
    assert response.json() == {"actor": "analyze", "dlq": "asya-demo-analyze-dlq", "moved": 2, "failed": 0,
                               "not_deleted": 0}  # fmt: skip
    assert sorted(body["n"] for body in _receive(mesh, "analyze")) in ([0, 1], [0, 2], [1, 2])
    rest = client.post("/api/v1/system/dlq/analyze/redrive", json={}).json()
    assert rest["moved"] == 1
    unknown = client.post("/api/v1/system/dlq/nope/redrive", json={})
    assert unknown.status_code == 404 and unknown.json()["error"].startswith(
        "actor not found: nope (actors with a DLQ:"
    )
    bad = client.post("/api/v1/system/dlq/analyze/redrive", json={"limit": 0})
    assert bad.status_code == 400 and bad.json()["error"] == "limit: a whole number 1..1000, got 0"


def test_gw_dlq_1_the_route_redrives_like_asya_dlq_keeping_the_trace_header(client: httpx.Client, mesh: Any) -> None:
    """The route runs the same copy as ``asya dlq redrive`` (:func:`asya.redrive.copy_back`): attributes and the
    X-Ray trace header travel with the body."""
    sqs = mesh.aws.sqs
    dlq_url = sqs.get_queue_url(QueueName="asya-demo-analyze-dlq")["QueueUrl"]
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    sqs.send_message(
        QueueUrl=dlq_url,
        MessageBody=json.dumps({"n": 9}),
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "envelope"}},
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
    )
    sent: list[dict[str, Any]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: sent.extend(params["Entries"])
    )
    assert client.post("/api/v1/system/dlq/analyze/redrive", json={}).json()["moved"] == 1
    # moto drops MessageSystemAttributes in SendMessageBatch (AWS keeps them): check the request
    assert sent[0]["MessageSystemAttributes"] == {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    assert sent[0]["MessageAttributes"] == {"kind": {"DataType": "String", "StringValue": "envelope"}}
