"""Overload on the gateway: AWS throttling reaches a client as 429 or 503 with ``Retry-After``, never 500, and never
leaves a task behind that nothing drives (docs/http.md GW-OVL-2..5).

moto never throttles, so the throttling is injected with botocore event hooks on the gateway's own clients, as the
chaos harness does (``chaos/faults.py``): a ``before-parameter-build`` hook raises the error AWS answers once the SDK's
retries are used up. A lost answer of a write that succeeded (a read timeout) is played by a ``needs-retry`` hook
that makes the SDK send the same request again after it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)
URL = "/api/v1/mesh/?flow=text-pipeline"
BODY = {"payload": {"text": "hi"}}
#: a payload too large for the task item: it goes to a BODY item
LARGE = {"payload": {"text": "x" * 2000}}
CONFIG = GatewayConfig(retry_after_seconds=7)


class Faults:
    """Hooks on one client: ``throttle(operation, code, times)`` fails the next ``times`` calls of ``operation``
    with the AWS error ``code``; ``lose_answer(operation)`` makes the SDK retry the next successful call of it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._hooks: list[tuple[str, Callable[..., Any]]] = []
        self.played: list[str] = []

    def throttle(self, operation: str, code: str, *, times: int = 1_000, when: Callable[[dict[str, Any]], bool] = bool):
        left = [times]

        def hook(params: dict[str, Any], **_: Any) -> None:
            if left[0] > 0 and (when is bool or when(params)):
                left[0] -= 1
                self.played.append(f"{operation}:{code}")
                if code == "ReadTimeout":
                    raise ReadTimeoutError(endpoint_url="http://injected")
                raise ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)

        self._register(f"before-parameter-build.{self._service}.{operation}", hook)

    def lose_answer(self, operation: str, *, when: Callable[[dict[str, Any]], bool]) -> None:
        """The first successful ``operation`` matching ``when`` (on its request body) is sent again at once."""
        done = [False]

        def hook(attempts: int, caught_exception: Any, request_dict: dict[str, Any], **_: Any) -> int | None:
            if done[0] or attempts > 1 or caught_exception is not None or not when(request_dict):
                return None
            done[0] = True
            self.played.append(f"{operation}:lost-answer")
            return 0  # seconds to sleep before the retry

        self._register(f"needs-retry.{self._service}.{operation}", hook)

    @property
    def _service(self) -> str:
        return str(self._client.meta.service_model.service_id.hyphenize())

    def _register(self, event: str, hook: Callable[..., Any]) -> None:
        self._client.meta.events.register(event, hook)
        self._hooks.append((event, hook))

    def clear(self) -> None:
        for event, hook in self._hooks:
            self._client.meta.events.unregister(event, hook)
        self._hooks.clear()


class Gw:
    def __init__(self, client: httpx.Client, store: TaskStore, mesh: Any) -> None:
        self.client, self.store, self.mesh = client, store, mesh
        self.dynamodb = Faults(mesh.aws.dynamodb)
        self.sqs = Faults(mesh.aws.sqs)

    def post(self, key: str | None = None, body: dict[str, Any] = BODY) -> httpx.Response:
        headers = {} if key is None else {"Idempotency-Key": key}
        return self.client.post(URL, json=body, headers=headers)

    def items(self, sk: str) -> list[dict[str, Any]]:
        items = self.mesh.aws.dynamodb.scan(TableName=self.mesh.resources.table, ConsistentRead=True)["Items"]
        return [i for i in items if i["sk"]["S"] == sk]

    def tasks(self) -> list[dict[str, Any]]:
        return self.items("TASK")

    def first_queue_messages(self) -> list[dict[str, Any]]:
        sqs = self.mesh.aws.sqs
        url = sqs.get_queue_url(QueueName="asya-demo-normalize")["QueueUrl"]
        messages: list[dict[str, Any]] = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", [])
        return messages


@pytest.fixture
def gw(mesh: Any, serve_asgi: Any) -> Iterator[Gw]:
    store = mesh.store(ManualClock(START))
    app = create_app(CONFIG, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=ManualClock(START))
    with httpx.Client(base_url=serve_asgi(app), timeout=60) as client:
        gw = Gw(client, store, mesh)
        yield gw
        gw.dynamodb.clear()
        gw.sqs.clear()


def _overloaded(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["retry-after"] == "7"
    assert "overloaded" in response.json()["error"]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ProvisionedThroughputExceededException", 429),
        ("ThrottlingException", 429),
        ("RequestLimitExceeded", 429),
        ("InternalServerError", 503),
        ("ReadTimeout", 503),
    ],
)
def test_gw_ovl_2_a_throttled_create_answers_429_or_503_with_retry_after_and_leaves_no_task(
    gw: Gw, code: str, status: int
) -> None:
    gw.dynamodb.throttle("PutItem", code, when=lambda p: p["Item"]["sk"]["S"] == "TASK")
    _overloaded(gw.post(), status)
    assert gw.tasks() == []


def test_gw_ovl_2_a_throttled_read_answers_429_never_500(gw: Gw) -> None:
    created = gw.post()
    assert created.status_code == 201, created.text
    gw.dynamodb.throttle("Query", "ProvisionedThroughputExceededException")
    gw.dynamodb.throttle("GetItem", "ProvisionedThroughputExceededException")
    _overloaded(gw.client.get(f"/api/v1/mesh/{created.json()['id']}"), 429)
    _overloaded(gw.client.get("/api/v1/mesh/?flow=text-pipeline"), 429)
    assert gw.dynamodb.played


def test_gw_ovl_4_a_throttled_first_send_deletes_the_task_and_a_retry_with_the_key_makes_exactly_one(gw: Gw) -> None:
    gw.sqs.throttle("SendMessage", "RequestThrottled", times=1)
    _overloaded(gw.post("ovl-send"), 429)
    assert gw.tasks() == []  # nothing started: the record is gone, and the key is free again
    again = gw.post("ovl-send")
    assert again.status_code == 201, again.text
    assert [t["pk"]["S"] for t in gw.tasks()] == [f"TASK#{again.json()['id']}"]
    assert len(gw.first_queue_messages()) == 1


def test_gw_ovl_4_a_throttled_timer_answers_429_and_leaves_no_task(gw: Gw) -> None:
    """A create with a timeout arms its deadline timer first: a throttled timer send is an overload as well."""
    gw.sqs.throttle("SendMessage", "KMS.ThrottlingException", times=1)
    _overloaded(gw.post(body={**BODY, "timeout": 60}), 429)
    assert gw.tasks() == []
    assert gw.first_queue_messages() == []


def test_gw_ovl_4_when_the_undo_is_throttled_too_the_key_resumes_the_same_task(gw: Gw) -> None:
    """The send and the delete that would undo the create are both throttled: the task stays ``pending`` with its
    key reserved, and the retry with the key sends it (GW-CREATE-R3-7): exactly one task, one message."""
    gw.sqs.throttle("SendMessage", "RequestThrottled", times=1, when=lambda p: "normalize" in p["QueueUrl"])
    gw.dynamodb.throttle("BatchWriteItem", "ProvisionedThroughputExceededException")
    gw.dynamodb.throttle("DeleteItem", "ProvisionedThroughputExceededException")
    _overloaded(gw.post("ovl-kept"), 429)
    kept = gw.tasks()
    assert len(kept) == 1 and kept[0]["status"]["S"] == "pending"
    gw.dynamodb.clear()
    again = gw.post("ovl-kept")
    assert again.status_code == 201, again.text
    assert f"TASK#{again.json()['id']}" == kept[0]["pk"]["S"]
    assert len(gw.tasks()) == 1
    assert len(gw.first_queue_messages()) == 1


def _sent(gw: Gw) -> list[dict[str, Any]]:
    """Records every ``SendMessage`` the gateway's SQS client gets past the injected faults (registered last, it sees
    only what was sent)."""
    sent: list[dict[str, Any]] = []
    hook = lambda params, **_: sent.append(dict(params))  # noqa: E731
    gw.mesh.aws.sqs.meta.events.register_last("before-parameter-build.sqs.SendMessage", hook)
    gw.sqs._hooks.append(("before-parameter-build.sqs.SendMessage", hook))
    return sent


def _in_flight(sent: list[dict[str, Any]], task: dict[str, Any]) -> bool:
    """The task's envelope was sent to its first actor, or its deadline timer to the timer queue."""
    task_id = task["pk"]["S"].removeprefix("TASK#")
    for params in sent:
        if params["QueueUrl"].endswith("/asya-demo-normalize") and task_id in params["MessageBody"]:
            return True
        if params["QueueUrl"].endswith("/asya-demo-x-deadline"):
            timer = json.loads(params["MessageBody"])
            if timer["id"] == task_id and timer["deadline_at"] == task["deadline_at"]["S"]:
                return True
    return False


@pytest.mark.parametrize("refused", ["asya-demo-x-deadline", "asya-demo-normalize"])
def test_gw_ovl_4_no_throttle_leaves_a_pending_task_with_nothing_in_flight(gw: Gw, refused: str) -> None:
    """The timer's or the envelope's send is throttled, and so is every delete that would undo the create: whatever
    task the create leaves ``pending`` still has its deadline timer in flight, so it ends even if the client never
    retries."""
    gw.sqs.throttle("SendMessage", "RequestThrottled", times=1, when=lambda p: refused in p["QueueUrl"])
    gw.dynamodb.throttle("BatchWriteItem", "ProvisionedThroughputExceededException")
    gw.dynamodb.throttle("DeleteItem", "ProvisionedThroughputExceededException")
    sent = _sent(gw)
    _overloaded(gw.post(body={**BODY, "timeout": 60}), 429)
    gw.dynamodb.clear()
    pending = [task for task in gw.tasks() if task["status"]["S"] == "pending"]
    assert [task for task in pending if not _in_flight(sent, task)] == []


def test_gw_ovl_4_a_throttled_body_write_leaves_no_pending_task(gw: Gw) -> None:
    """The BODY item is written before the task item: its throttle leaves nothing to undo."""
    gw.dynamodb.throttle(
        "PutItem", "ProvisionedThroughputExceededException", when=lambda p: p["Item"]["sk"]["S"] == "BODY"
    )
    gw.dynamodb.throttle("DeleteItem", "ProvisionedThroughputExceededException")
    _overloaded(gw.post(body=LARGE), 429)
    assert gw.tasks() == []
    gw.dynamodb.clear()
    created = gw.post(body=LARGE)
    assert created.status_code == 201, created.text
    assert gw.client.get(f"/api/v1/mesh/{created.json()['id']}").json()["payload"] == LARGE["payload"]


def _put_of(sk: str) -> Callable[[dict[str, Any]], bool]:
    return lambda request: (
        f'"sk": {{"S": "{sk}"}}' in request["body"].decode() or f'"sk":{{"S":"{sk}"}}' in (request["body"].decode())
    )


def test_gw_ovl_5_a_create_whose_answer_was_lost_recognises_its_own_write(gw: Gw) -> None:
    """The task item's conditional put wrote, its answer was lost, and the SDK sent it again: the condition fails
    on the very item it wrote, which is the create's, not a taken id."""
    gw.dynamodb.lose_answer("PutItem", when=_put_of("TASK"))
    created = gw.post()
    assert created.status_code == 201, created.text
    assert gw.dynamodb.played == ["PutItem:lost-answer"]
    assert len(gw.tasks()) == 1


def test_gw_ovl_5_a_key_whose_reservation_answer_was_lost_is_this_requests(gw: Gw) -> None:
    """Without the token check the retried reservation finds "its first request still being created": 409."""
    gw.dynamodb.lose_answer("PutItem", when=_put_of("IDEMP"))
    created = gw.post("ovl-lost")
    assert created.status_code == 201, created.text
    assert gw.dynamodb.played == ["PutItem:lost-answer"]
    assert len(gw.tasks()) == 1


def test_gw_ovl_3_mcp_and_a2a_answer_the_overload_error_with_retry_after(gw: Gw) -> None:
    gw.dynamodb.throttle(
        "PutItem", "ProvisionedThroughputExceededException", when=lambda p: p["Item"]["sk"]["S"] == "TASK"
    )
    modern = "2026-07-28"
    call = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": modern,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
            "name": "text-pipeline",
            "arguments": {"text": "busy"},
        },
    }
    headers = {"MCP-Protocol-Version": modern, "Mcp-Method": "tools/call", "Mcp-Name": "text-pipeline"}
    mcp = gw.client.post("/mcp", json=call, headers=headers)
    assert mcp.status_code == 429, mcp.text
    assert mcp.headers["retry-after"] == "7"
    error = mcp.json()["error"]
    assert error["code"] == -32000 and error["data"] == {"retry_after": 7, "reason": "throttled"}
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-ovl",
        "parts": [{"kind": "data", "data": {"text": "hi"}}],
    }
    send = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "message/send",
        "params": {"message": message, "metadata": {"skill": "text-pipeline"}},
    }
    a2a = gw.client.post("/a2a/", json=send)
    assert a2a.status_code == 429, a2a.text
    assert a2a.headers["retry-after"] == "7"
    assert a2a.json()["error"]["code"] == -32000
    assert gw.tasks() == []


def _admission_gateway(mesh: Any, serve_asgi: Any) -> httpx.Client:
    config = GatewayConfig(retry_after_seconds=7, admission_drain_rates={"normalize": 1.0})
    app = create_app(config, manifest=mesh.manifest, store=mesh.store(ManualClock(START)), sqs=mesh.aws.sqs)
    return httpx.Client(base_url=serve_asgi(app), timeout=60)


def _fill_first_queue(mesh: Any, count: int) -> None:
    url = mesh.aws.sqs.get_queue_url(QueueName="asya-demo-normalize")["QueueUrl"]
    for n in range(count):
        mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=f'{{"backlog": {n}}}')


def test_gw_ovl_7_a_backlog_the_deadline_cannot_wait_out_refuses_new_tasks(mesh: Any, serve_asgi: Any) -> None:
    """1 task/s of drain, a 10 s timeout: a new task may wait 5 s, so 6 waiting tasks refuse it; no task is written."""
    _fill_first_queue(mesh, 6)
    with _admission_gateway(mesh, serve_asgi) as client:
        refused = client.post(URL, json={**BODY, "timeout": 10})
        untimed = client.post(URL, json=BODY)  # no deadline to miss: admitted
        longer = client.post(URL, json={**BODY, "timeout": 60})  # 30 s of budget: admitted
    _overloaded(refused, 429)
    assert "'normalize' has 6 tasks waiting" in refused.json()["error"]
    assert (untimed.status_code, longer.status_code) == (201, 201)
    tasks = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    assert len([t for t in tasks if t["sk"]["S"] == "TASK"]) == 2


def test_gw_ovl_7_the_queue_depth_is_read_at_most_once_per_five_seconds(mesh: Any) -> None:
    from asya.transport import Transport
    from asya_gateway.admission import DEPTH_CACHE_SECONDS, Admission
    from asya_gateway.errors import OverloadError

    now = [100.0]
    reads: list[str] = []
    admission = Admission(
        Transport(namespace="demo", sqs=mesh.aws.sqs), {"normalize": 1.0}, retry_after=7, monotonic=lambda: now[0]
    )
    events = mesh.aws.sqs.meta.events
    events.register(
        "before-parameter-build.sqs.GetQueueAttributes", lambda **_: reads.append("read"), unique_id="depth-reads"
    )
    try:
        admission.check("normalize", 10)  # an empty queue: admitted
        _fill_first_queue(mesh, 6)
        now[0] += DEPTH_CACHE_SECONDS - 0.5
        admission.check("normalize", 10)  # the cached depth: the backlog is not seen yet
        assert reads == ["read"]
        now[0] += 1.0
        with pytest.raises(OverloadError, match="6 tasks waiting"):
            admission.check("normalize", 10)
    finally:
        events.unregister("before-parameter-build.sqs.GetQueueAttributes", unique_id="depth-reads")
    assert reads == ["read", "read"]
