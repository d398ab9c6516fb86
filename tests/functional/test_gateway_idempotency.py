"""``Idempotency-Key`` on ``POST /api/v1/mesh/`` (GATEWAY GW-CREATE (R3), docs/http.md GW-CREATE-R3-1..5).

Same key and body within 24 h: the first 201 again, no second task. Same key, other body: 422. A key whose first
request is still being created: 409. The window is checked on read (the injectable clock moves past it). A bad
header: 400. Without the header nothing is written for the key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from asya_gateway.idempotency import ABANDONED_AFTER, WINDOW_SECONDS
from tests.asgi import asgi_client
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)
URL = "/api/v1/mesh/?flow=text-pipeline"
BODY = {"payload": {"text": "hi"}}


class Gw:
    def __init__(self, client: httpx.Client, store: TaskStore, clock: ManualClock, mesh: Any) -> None:
        self.client, self.store, self.clock, self.mesh = client, store, clock, mesh

    def post(self, key: str | None, body: dict[str, Any] = BODY) -> httpx.Response:
        headers = {} if key is None else {"Idempotency-Key": key}
        return self.client.post(URL, json=body, headers=headers)

    def items(self, prefix: str) -> list[dict[str, Any]]:
        items = self.mesh.aws.dynamodb.scan(TableName=self.mesh.resources.table, ConsistentRead=True)["Items"]
        return [i for i in items if i["pk"]["S"].startswith(prefix) and i["sk"]["S"] in ("TASK", "IDEMP")]

    def tasks(self) -> list[dict[str, Any]]:
        return self.items("TASK#")


@pytest.fixture
def gw(mesh: Any) -> Iterator[Gw]:
    clock = ManualClock(START)
    store = mesh.store(clock)
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app, timeout=60) as client:
        yield Gw(client, store, clock, mesh)


def test_gw_create_r3_a_retry_after_a_cut_connection_answers_the_first_201(gw: Gw) -> None:
    """The first request committed and its answer was lost: the retry with the same key gets the same 201 (same
    body, same Location) and no second task."""
    first = gw.post('"retry-1"')
    assert first.status_code == 201, first.text
    gw.clock.advance(seconds=30)
    again = gw.post('"retry-1"')
    assert again.status_code == 201, again.text
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"] == f"/api/v1/mesh/{first.json()['id']}"
    assert len(gw.tasks()) == 1


def test_gw_create_r3_concurrent_retries_make_one_task(gw: Gw) -> None:
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def send() -> None:
        response = gw.post("concurrent-1")
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    codes = sorted(r.status_code for r in answers)
    assert len(answers) == 6 and set(codes) <= {201, 409}, [(r.status_code, r.text) for r in answers]
    ids = {r.json()["id"] for r in answers if r.status_code == 201}
    assert len(ids) == 1, ids
    assert len(gw.tasks()) == 1
    # once created, every retry answers the task
    assert gw.post("concurrent-1").json()["id"] in ids


def test_gw_create_r3_a_key_reused_with_another_body_answers_422(gw: Gw) -> None:
    assert gw.post("reuse-1").status_code == 201
    other = gw.post("reuse-1", {"payload": {"text": "other"}})
    assert other.status_code == 422, other.text
    assert "Idempotency-Key" in other.json()["error"]
    assert len(gw.tasks()) == 1


def test_gw_create_r3_a_key_still_being_created_answers_409_until_abandoned(gw: Gw) -> None:
    """A reservation without its task (the first request is between its two writes) answers 409; one older than
    ``ABANDONED_AFTER`` (its gateway died) is taken over by the next retry."""
    from asya_gateway.idempotency import IdempotencyKeys, fingerprint

    keys = IdempotencyKeys(
        table=gw.store.table, dynamodb=gw.store.dynamodb, task_exists=lambda i: bool(gw.store.statuses([i]))
    )
    keys.claim(
        caller="",
        key="busy-1",
        print_=fingerprint("flow=text-pipeline", BODY),
        task_id="00000000-0000-4000-8000-000000000000",
        answer={"id": "00000000-0000-4000-8000-000000000000", "status": "pending"},
        now=gw.clock(),
    )
    busy = gw.post("busy-1")
    assert busy.status_code == 409, busy.text
    assert gw.tasks() == []
    gw.clock.advance(seconds=ABANDONED_AFTER + 1)
    taken = gw.post("busy-1")
    assert taken.status_code == 201, taken.text
    assert taken.json()["id"] != "00000000-0000-4000-8000-000000000000"
    assert len(gw.tasks()) == 1


def test_gw_create_r3_the_window_is_checked_on_read_an_expired_key_creates_a_new_task(gw: Gw) -> None:
    """moto never deletes by TTL, like DynamoDB deleting late: the 24 h are checked by the write's condition."""
    first = gw.post("window-1")
    gw.clock.advance(seconds=WINDOW_SECONDS + 1)
    later = gw.post("window-1", {"payload": {"text": "another body is fine now"}})
    assert later.status_code == 201, later.text
    assert later.json()["id"] != first.json()["id"]
    assert len(gw.tasks()) == 2


@pytest.mark.parametrize("bad", ["", "a" * 256, "caf\u00e9", "two words", '"unterminated', 'a"b'])
def test_gw_create_r3_a_malformed_key_answers_400(gw: Gw, bad: str) -> None:
    response = gw.client.post(URL, json=BODY, headers={b"Idempotency-Key": bad.encode()})
    assert response.status_code == 400, (bad, response.text)
    assert "Idempotency-Key" in response.json()["error"]
    assert gw.tasks() == []


def test_gw_create_r3_without_the_header_no_key_is_written(gw: Gw) -> None:
    assert gw.post(None).status_code == 201
    assert gw.post(None).status_code == 201
    assert len(gw.tasks()) == 2 and gw.items("IDEMP#") == []


def test_gw_create_r3_keys_are_scoped_per_credential(gw: Gw) -> None:
    a = gw.client.post(URL, json=BODY, headers={"Idempotency-Key": "k", "X-API-Key": "alice"})
    b = gw.client.post(URL, json=BODY, headers={"Idempotency-Key": "k", "X-API-Key": "bob"})
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["id"] != b.json()["id"]


def test_gw_create_r3_a_failed_creation_releases_its_key(gw: Gw) -> None:
    """GW-CREATE-8: the entry queue is gone, 404; the key is freed, so the retry (queue back) creates."""
    url = gw.mesh.resources.queue_urls["normalize"]
    attributes = gw.mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    gw.mesh.aws.sqs.delete_queue(QueueUrl=url)
    gone = gw.post("fail-1")
    assert gone.status_code == 404, gone.text
    assert gw.items("IDEMP#") == []
    name = url.rsplit("/", 1)[1]
    keep = {k: v for k, v in attributes.items() if k in ("VisibilityTimeout", "MessageRetentionPeriod")}
    gw.mesh.aws.sqs.create_queue(QueueName=name, Attributes=keep)
    assert gw.post("fail-1").status_code == 201


def test_gw_create_r3_openapi_documents_the_header_and_its_answers(gw: Gw) -> None:
    spec = gw.client.get("/openapi.json").json()
    create = spec["paths"]["/api/v1/mesh/"]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in create["parameters"])
    assert {"201", "400", "409", "422"} <= set(create["responses"])


class _CutOnce(httpx.HTTPTransport):
    """Delivers the first request, then loses its answer, as a connection cut after the gateway committed."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if self.cut == 0:
            self.cut += 1
            response.read()
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return response


def test_gw_create_r3_asya_call_retries_a_cut_create_with_the_same_key(gw: Gw, serve_asgi: Any) -> None:
    """``asya call`` (``GatewayClient.create``): the first create committed but its answer was lost; the client sends
    it again with the same key and gets the first task (over a real connection, which the transport cuts)."""
    from asya_local.client import GatewayClient

    app = create_app(GatewayConfig(), manifest=gw.mesh.manifest, store=gw.store, sqs=gw.mesh.aws.sqs, clock=gw.clock)
    transport = _CutOnce()
    with GatewayClient(serve_asgi(app), http=httpx.Client(transport=transport, timeout=60)) as client:
        created = client.create(flow="text-pipeline", payload={"text": "hi"})
    assert transport.cut == 1
    assert [item["id"]["S"] for item in gw.tasks()] == [created["id"]]


def test_gw_create_r3_an_mcp_call_sent_again_in_its_session_follows_its_first_task(mesh: Any) -> None:
    """MCP's key is what the call already has, its session and request id (the task id derives from them), so a
    ``tools/call`` sent again after a cut connection follows the task it created, with no extra write; the same id
    reused for other arguments (MCP forbids it) still runs, under a fresh id."""
    clock = ManualClock(START)
    store = mesh.store(clock)
    config = GatewayConfig(sse_poll_fast=0.01, sse_poll_slow=0.01, sse_gap_wait=0.05, sse_max_seconds=0.3)
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app, timeout=30) as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
        headers = {"Mcp-Session-Id": client.post("/mcp", json=init).headers["mcp-session-id"]}

        def call(arguments: dict[str, Any]) -> str:
            body = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "text-pipeline", "arguments": arguments},
            }
            return str(client.post("/mcp", json=body, headers=headers).json()["result"]["_meta"]["asya/task_id"])

        first = call({"text": "hi"})
        assert call({"text": "hi"}) == first
        gw = Gw(client, store, clock, mesh)
        assert len(gw.tasks()) == 1
        other = call({"text": "something else"})
        assert other != first and len(gw.tasks()) == 2


def test_gw_create_r3_an_a2a_message_sent_again_answers_its_first_task(mesh: Any) -> None:
    """A2A's key is the client's ``messageId`` (scoped per credential): the same message sent again after a cut
    connection answers the task it created; the id reused for another message is -32602."""
    clock = ManualClock(START)
    store = mesh.store(clock)
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    with asgi_client(app, timeout=30) as client:

        def send(text: str) -> dict[str, Any]:
            message = {"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"data": {"text": text}}]}
            configuration = {"returnImmediately": True}
            params = {"message": message, "metadata": {"skill": "text-pipeline"}, "configuration": configuration}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            answer: dict[str, Any] = client.post("/a2a/", json=body).json()
            return answer

        first = send("hi")["result"]["task"]
        again = send("hi")["result"]["task"]
        assert (again["id"], again["contextId"]) == (first["id"], first["contextId"])
        gw = Gw(client, store, clock, mesh)
        assert len(gw.tasks()) == 1
        reused = send("another text")
        assert reused["error"]["code"] == -32602 and "messageId" in reused["error"]["message"]
        assert len(gw.tasks()) == 1


def _cut_creation(gw: Gw, key: str, task_id: str) -> None:
    """A first create that wrote its key and its record, then stopped before its send (a restart, a timeout)."""
    from asya_gateway.idempotency import IdempotencyKeys, fingerprint

    keys = IdempotencyKeys(
        table=gw.store.table, dynamodb=gw.store.dynamodb, task_exists=lambda i: bool(gw.store.statuses([i]))
    )
    answer = {"id": task_id, "status": "pending", "deadline_at": "2026-03-01T10:02:00.500Z"}
    keys.claim(
        caller="",
        key=key,
        print_=fingerprint("flow=text-pipeline", BODY),
        task_id=task_id,
        answer=answer,
        now=gw.clock(),
    )
    gw.store.create_task(
        task_id=task_id,
        actor="normalize",
        flow="text-pipeline",
        payload=BODY["payload"],
        deadline_at=answer["deadline_at"],
    )


def _received(gw: Gw, actor: str) -> list[str]:
    url = gw.mesh.resources.queue_urls[actor]
    messages = gw.mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"])["id"] for m in messages]


def test_gw_create_r3_7_a_replay_sends_what_a_cut_creation_never_sent(gw: Gw) -> None:
    """GW-CREATE-R3-7: the record exists, the envelope was never sent; the retry with the key answers the first 201
    and sends the envelope, so the task runs instead of staying ``pending`` (found by ``make chaos``: a gateway
    restart cut a create between its record and its send)."""
    task_id = "00000000-0000-4000-8000-00000000c0de"
    _cut_creation(gw, "cut-1", task_id)
    assert _received(gw, "normalize") == []
    again = gw.post("cut-1")
    assert again.status_code == 201, again.text
    assert again.json()["id"] == task_id
    assert again.json()["deadline_at"] == "2026-03-01T10:02:00.500Z"
    assert _received(gw, "normalize") == [task_id]
    assert len(gw.tasks()) == 1


def test_gw_create_r3_7_a_replay_of_a_started_task_sends_nothing(gw: Gw) -> None:
    """Once an actor has claimed a hop (the task item has a fence) the replay only answers: no second envelope."""
    first = gw.post("started-1")
    assert first.status_code == 201, first.text
    task_id = first.json()["id"]
    assert _received(gw, "normalize") == [task_id]
    gw.mesh.aws.dynamodb.update_item(
        TableName=gw.store.table,
        Key={"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": "TASK"}},
        UpdateExpression="SET fence_h = :h, fence_a = :a",
        ExpressionAttributeValues={":h": {"N": "0"}, ":a": {"N": "1"}},
    )
    again = gw.post("started-1")
    assert again.json() == first.json()
    assert _received(gw, "normalize") == []
