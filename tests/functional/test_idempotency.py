"""Duplicate-delivery suppression against moto (PROTOCOL P-ACK-7, P-ACK-8, P-FAN-2; GATEWAY GW-DATA-2, GW-DATA-8).

Deliveries are real: messages are received from the moto queues with every attribute and turned into the Lambda
event by ``asya_local.lambda_event.sqs_event``; a redelivery is the same message received again (after its visibility
was set to 0, as a crash or a failed record leaves it, or after its visibility timeout really expired).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError

from asya import tableschema
from asya.config import ActorConfig
from asya.envelope import Envelope, Route
from asya.idempotency import CLAIMED, SENT, Delivery, DuplicateInFlightError, HopKey, Idempotency
from asya.routing import Outgoing
from asya.sidecar import ActorRuntime
from asya.store import TaskStore
from asya.transport import TransportError
from asya_crew.sink import SinkRuntime
from asya_local.lambda_event import sqs_event
from tests.functional.actors import NOW, Context, actor_env, drain, envelope

pytestmark = pytest.mark.functional


class Actor:
    """One actor runtime (one Lambda container) wired to the moto mesh."""

    def __init__(self, mesh: Any, handler: str, *, actor: str = "normalize", resiliency: str = "") -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.actor = actor
        config = ActorConfig.from_env(
            actor_env(mesh, actor, f"idem_handlers.{handler}", ASYA_ACTOR_TIMEOUT="60", ASYA_RESILIENCY=resiliency)
        )
        self.runtime = ActorRuntime(
            config, sqs=self.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3, clock=lambda: NOW, sleep=lambda _s: None
        )

    def handle(self, messages: list[Any]) -> list[str]:
        """Invoke the runtime with ``messages`` as one batch; the message ids it reported failed."""
        event = sqs_event(messages, queue_arn=f"arn:aws:sqs:us-east-1:123456789012:{self.actor}", region="us-east-1")
        response = self.runtime.handle(event, Context())
        return [f["itemIdentifier"] for f in response["batchItemFailures"]]


class Mesh:
    def __init__(self, mesh: Any) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.dynamodb = mesh.aws.dynamodb
        self.table = mesh.resources.table
        self.store = TaskStore(
            table=self.table, bucket=mesh.resources.bucket, dynamodb=self.dynamodb, clock=lambda: NOW
        )

    def url(self, actor: str) -> str:
        return str(self.mesh.resources.queue_urls[actor])

    def send(self, actor: str, body: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.url(actor), MessageBody=json.dumps(body))

    def receive(self, actor: str, count: int = 1, *, timeout: float = 10.0) -> list[Any]:
        """``count`` messages of ``actor``'s queue, with every attribute (they stay in flight)."""
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(messages) < count:
            assert time.monotonic() < deadline, f"only {len(messages)} of {count} messages arrived on {actor}"
            got = self.sqs.receive_message(
                QueueUrl=self.url(actor), MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]
            )
            messages.extend(got.get("Messages", []))
        return messages

    def redeliver(self, actor: str, messages: list[Any]) -> list[Any]:
        """Make in-flight ``messages`` visible again (as a crash leaves them) and receive them again."""
        for message in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.url(actor), ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        again = self.receive(actor, len(messages))
        assert {m["MessageId"] for m in again} == {m["MessageId"] for m in messages}
        return again

    def drain(self, actor: str) -> list[dict[str, Any]]:
        return drain(self.sqs, self.url(actor))

    def idem_items(self, key: HopKey) -> dict[str, dict[str, Any]]:
        items = self.dynamodb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": key.pk}},
            ConsistentRead=True,
        )["Items"]
        return {item["sk"]["S"]: item for item in items}

    def final_events(self, task_id: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.store.events_after(task_id, 0)
            if e["event"] == "status" and e["data"]["status"] in ("succeeded", "failed")
        ]


@pytest.fixture
def world(mesh: Any) -> Mesh:
    return Mesh(mesh)


@pytest.fixture
def handlers() -> Iterator[Callable[[], Any]]:
    """The handler module the runtimes loaded (its gates and call log; load an ``Actor`` first), reset afterwards."""
    if "idem_handlers" in sys.modules:
        _reset(sys.modules["idem_handlers"])
    yield lambda: sys.modules["idem_handlers"]
    if "idem_handlers" in sys.modules:
        _reset(sys.modules["idem_handlers"])


def _reset(module: Any) -> None:
    while not module.GATES.empty():
        module.GATES.get_nowait().release.set()
    module.CALLS.clear()


# -- sequential redelivery -------------------------------------------------------------------------------------------


def test_p_ack_8_redelivered_hop_sends_its_frame_once_and_the_item_expires(world: Mesh, handlers: Any) -> None:
    actor = Actor(world.mesh, "echo")
    world.send("normalize", envelope("t-1"))
    first = world.receive("normalize")
    assert first[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert actor.handle(first) == []
    assert [o["id"] for o in world.drain("analyze")] == ["t-1"]

    again = world.redeliver("normalize", first)  # the invocation crashed after the send (P-ACK-5)
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    assert actor.handle(again) == []
    assert world.drain("analyze") == [], "the redelivered hop must not route its frame again"
    assert len(handlers().CALLS) == 2, "the handler itself runs again on a redelivery (P-ACK-7)"

    items = world.idem_items(HopKey("t-1", "normalize", 0, 1))
    assert set(items) == {"FRAME#0"}
    item = items["FRAME#0"]
    assert item["pk"]["S"] == "IDEM#t-1#normalize#0#1"
    assert item["state"]["S"] == SENT
    assert int(item["ttl"]["N"]) == int((NOW + timedelta(days=tableschema.IDEMPOTENCY_RETENTION_DAYS)).timestamp())


def test_p_ack_8_redelivered_handler_error_sends_its_x_sink_envelope_once(world: Mesh, handlers: Any) -> None:
    """The outcome of a handler error is the hop's output too: no second x-sink envelope on a redelivery."""
    actor = Actor(world.mesh, "boom")
    world.send("normalize", envelope("t-err"))
    first = world.receive("normalize")
    assert actor.handle(first) == []
    assert actor.handle(world.redeliver("normalize", first)) == []
    assert len(handlers().CALLS) == 2
    assert [(o["id"], o["status"]["phase"]) for o in world.drain("x-sink")] == [("t-err", "failed")]


def test_p_ack_8_redelivered_handler_error_schedules_one_retry(world: Mesh, handlers: Any) -> None:
    """A second retry envelope would double every later attempt of the task (P-RES-8 + P-ACK-8)."""
    actor = Actor(world.mesh, "boom", resiliency='{"policies": {"default": {"initial_delay": 60, "jitter": false}}}')
    world.send("normalize", envelope("t-err"))
    first = world.receive("normalize")
    assert actor.handle(first) == []
    assert actor.handle(world.redeliver("normalize", first)) == []
    assert len(handlers().CALLS) == 2
    for message in first:  # the record was acked: only delayed retry envelopes are left on the queue
        world.sqs.delete_message(QueueUrl=world.url("normalize"), ReceiptHandle=message["ReceiptHandle"])
    attributes = world.sqs.get_queue_attributes(
        QueueUrl=world.url("normalize"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"


def test_p_ack_8_fan_out_redelivery_and_stable_child_ids(world: Mesh, handlers: Any) -> None:
    """P-FAN-2 + P-ACK-8: a redelivered fan-out sends no child twice; when a crash window lets frames go out again,
    the children carry the same ids, so the next hop recognises them as duplicates."""
    splitter = Actor(world.mesh, "split")
    world.send("normalize", envelope("t-fan", payload={"text": "a b c"}))
    first = world.receive("normalize")
    assert splitter.handle(first) == []
    outs = world.drain("analyze")
    assert [o["payload"]["chunk"] for o in outs] == [0, 1, 2]
    ids = [o["id"] for o in outs]
    assert ids[0] == "t-fan" and all(uuid.UUID(i).version == 4 for i in ids[1:]) and len(set(ids)) == 3

    again = world.redeliver("normalize", first)
    assert splitter.handle(again) == []
    assert world.drain("analyze") == []

    # a crash between the sends and the item writes: the items are gone, the third delivery sends again
    key = HopKey("t-fan", "normalize", 0, 1)
    for sk in world.idem_items(key):
        world.dynamodb.delete_item(TableName=world.table, Key={"pk": {"S": key.pk}, "sk": {"S": sk}})
    third = world.redeliver("normalize", again)
    assert splitter.handle(third) == []
    duplicates = world.drain("analyze")
    assert [o["id"] for o in duplicates] == ids, "redelivered children must get the same ids"

    # the next hop gets both copies of every child in one batch and routes each once
    for body in [*outs, *duplicates]:
        world.send("analyze", body)
    analyzer = Actor(world.mesh, "echo", actor="analyze")
    assert analyzer.handle(world.receive("analyze", 6)) == []
    sunk = world.drain("x-sink")
    assert sorted(o["id"] for o in sunk) == sorted(ids)


class FailEntries:
    """Makes SQS refuse (``Failed``, not a sender fault) every ``SendMessageBatch`` entry whose body holds ``marker``
    while active; the other entries of the request are really sent."""

    def __init__(self, sqs: Any, marker: str) -> None:
        self.sqs = sqs
        self.marker = marker
        self.active = True
        self.plain = boto3.client("sqs", region_name="us-east-1")  # no hooks: sends the entries that pass

    def __enter__(self) -> FailEntries:
        self.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._keep)
        self.sqs.meta.events.register("before-call.sqs.SendMessageBatch", self._answer)
        return self

    def __exit__(self, *_: object) -> None:
        self.sqs.meta.events.unregister("before-parameter-build.sqs.SendMessageBatch", self._keep)
        self.sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", self._answer)

    def _keep(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["fail_entries_params"] = dict(params)

    def _answer(self, context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        params = context["fail_entries_params"]
        refused = [e for e in params["Entries"] if self.active and self.marker in e["MessageBody"]]
        if not refused:
            return None
        passing = [e for e in params["Entries"] if e not in refused]
        answer: dict[str, Any] = {"Successful": [], "Failed": []}
        if passing:
            answer = self.plain.send_message_batch(QueueUrl=params["QueueUrl"], Entries=passing)
        answer.setdefault("Failed", []).extend(
            {"Id": e["Id"], "SenderFault": False, "Code": "ServiceUnavailable", "Message": "refused by the test"}
            for e in refused
        )
        return AWSResponse(params["QueueUrl"], 200, HTTPHeaders(), None), answer


def test_p_ack_8_an_outcome_is_never_taken_for_a_frame_an_earlier_delivery_sent(world: Mesh, handlers: Any) -> None:
    """Delivery 1 sends frame 0 and fails on frame 1; delivery 2's handler raises. Its retry is the hop's outcome,
    not frame 0 again: it must leave (P-ACK-8: duplicates are allowed, loss is not; P-RES-8), or frame 1 is lost."""
    policy = '{"policies": {"default": {"max_attempts": 3, "initial_delay": 60, "jitter": false}}}'
    actor = Actor(world.mesh, "split_then_fail", resiliency=policy)
    world.send("normalize", envelope("t-flaky"))
    first = world.receive("normalize")
    with FailEntries(world.sqs, '"unlucky"') as refusing:
        assert actor.handle(first) == [first[0]["MessageId"]], "frame 1 was not sent: the record must fail"
        refusing.active = False
        assert [o["payload"] for o in world.drain("analyze")] == [{"chunk": 0}]
        again = world.redeliver("normalize", first)
        assert actor.handle(again) == []
    for message in again:  # acked: what is left on the queue is the delayed retry
        world.sqs.delete_message(QueueUrl=world.url("normalize"), ReceiptHandle=message["ReceiptHandle"])
    attributes = world.sqs.get_queue_attributes(
        QueueUrl=world.url("normalize"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1", "the retry of delivery 2 was dropped"
    assert set(world.idem_items(HopKey("t-flaky", "normalize", 0, 1))) == {"FRAME#0", "OUTCOME"}


@pytest.mark.parametrize("handler", ["nothing", "end_route"])
def test_p_ack_8_sink_outcome_of_a_redelivered_hop_is_sent_once(world: Mesh, handlers: Any, handler: str) -> None:
    """Zero frames (P-ROUTE-5) and an exhausted route (P-ROUTE-4) both end at x-sink: once per hop."""
    actor = Actor(world.mesh, handler)
    world.send("normalize", envelope("t-end", nxt=[]))
    first = world.receive("normalize")
    assert actor.handle(first) == []
    assert actor.handle(world.redeliver("normalize", first)) == []
    assert [o["id"] for o in world.drain("x-sink")] == ["t-end"]


def test_p_ack_8_same_envelope_twice_in_one_batch_routes_once(world: Mesh, handlers: Any) -> None:
    actor = Actor(world.mesh, "echo")
    world.send("normalize", envelope("t-twin"))
    world.send("normalize", envelope("t-twin"))
    assert actor.handle(world.receive("normalize", 2)) == []
    assert [o["id"] for o in world.drain("analyze")] == ["t-twin"]


def test_p_ack_8_a_retry_is_a_new_attempt(world: Mesh, handlers: Any) -> None:
    """The key holds the attempt (P-PROC-4): a retry of this actor runs the hop anew, a stale retrying status of
    another actor does not. This is the duplicate-suppression side of P-RES-10: frames an earlier attempt already
    sent do not stop the retry from sending them again (``test_p_res_10_...`` in test_retry.py has the failing
    generator)."""
    actor = Actor(world.mesh, "echo")
    world.send("normalize", envelope("t-r"))
    assert actor.handle(world.receive("normalize")) == []
    retry = envelope("t-r")
    retry["status"].update(phase="retrying", attempt=2, max_attempts=3)
    world.send("normalize", retry)
    assert actor.handle(world.receive("normalize")) == []
    assert [o["id"] for o in world.drain("analyze")] == ["t-r", "t-r"]
    assert set(world.idem_items(HopKey("t-r", "normalize", 0, 2))) == {"FRAME#0"}


def test_p_ack_8_a_loop_through_the_same_actor_is_a_new_hop(world: Mesh, handlers: Any) -> None:
    """An actor visited twice in one lineage: ``len(route.prev)`` tells the visits apart."""
    actor = Actor(world.mesh, "echo")
    world.send("normalize", envelope("t-loop", nxt=["normalize"]))
    assert actor.handle(world.receive("normalize")) == []
    assert actor.handle(world.receive("normalize")) == []  # the second visit, route.prev = ["normalize"]
    [out] = world.drain("x-sink")
    assert out["route"]["prev"] == ["normalize", "normalize"]


# -- concurrent duplicates (visibility timeout expired while the handler ran) ------------------------------------------


@pytest.mark.parametrize("finishes_first", ["redelivery", "first delivery"])
def test_p_ack_8_concurrent_duplicate_yields_one_envelope_and_one_final_status(
    world: Mesh, handlers: Any, finishes_first: str
) -> None:
    """The first delivery blocks in its handler until the queue's 1 s visibility timeout made SQS deliver the message
    again to a second container; whichever finishes first sends, the other skips: one x-sink envelope, one final
    status (P-ACK-7, P-ACK-8, P-SINK-7)."""
    world.store.create_task(task_id="t-slow", actor="normalize")
    world.sqs.set_queue_attributes(QueueUrl=world.url("normalize"), Attributes={"VisibilityTimeout": "1"})
    container_1, container_2 = Actor(world.mesh, "gated"), Actor(world.mesh, "gated")
    module = handlers()
    first_gate, second_gate = module.Gate(), module.Gate()
    module.GATES.put(first_gate)
    if finishes_first == "first delivery":
        module.GATES.put(second_gate)
    world.send("normalize", envelope("t-slow", nxt=[]))
    first = world.receive("normalize")
    results: dict[str, list[str]] = {}
    runs = [threading.Thread(target=lambda: results.update(first=container_1.handle(first)))]
    runs[0].start()
    assert first_gate.entered.wait(10)

    second = world.receive("normalize", timeout=15)  # visible again once the visibility timeout expired
    assert second[0]["MessageId"] == first[0]["MessageId"]
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    runs.append(threading.Thread(target=lambda: results.update(second=container_2.handle(second))))
    runs[1].start()
    if finishes_first == "first delivery":
        assert second_gate.entered.wait(10)
        first_gate.release.set()
        runs[0].join(30)
        second_gate.release.set()
        runs[1].join(30)
    else:
        runs[1].join(30)
        first_gate.release.set()
        runs[0].join(30)
    assert not any(run.is_alive() for run in runs)
    assert results == {"first": [], "second": []}
    assert len(module.CALLS) == 2

    sunk = world.drain("x-sink")
    assert [o["id"] for o in sunk] == ["t-slow"]
    sink = SinkRuntime(
        ActorConfig.from_env(actor_env(world.mesh, "x-sink")),
        sqs=world.sqs,
        dynamodb=world.dynamodb,
        s3=world.mesh.aws.s3,
        clock=lambda: NOW,
    )
    world.send("x-sink", sunk[0])
    assert sink.handle(sqs_event(world.receive("x-sink"), queue_arn="arn:aws:sqs:::x", region="us-east-1"), None) == {
        "batchItemFailures": []
    }
    assert [e["data"]["status"] for e in world.final_events("t-slow")] == ["succeeded"]
    task = world.store.get_task("t-slow")
    assert task is not None and task["result"] == {"text": "hello big world", "gated": True}


# -- the guard against moto, step by step ---------------------------------------------------------------------------


class Calls:
    """Records the DynamoDB operations a client makes, with their parameters (botocore request events)."""

    def __init__(self, client: Any) -> None:
        self.names: list[str] = []
        self.writes: list[dict[str, Any]] = []
        client.meta.events.register("provide-client-params.dynamodb.*", self._record)

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.names.append(model.name)
        if model.name == "BatchWriteItem":
            self.writes.extend(r for requests in params["RequestItems"].values() for r in requests)


def _ledger(world: Mesh, *, clock: Callable[[], datetime] = lambda: NOW, visibility: int = 300) -> Idempotency:
    return Idempotency(
        table=world.table,
        dynamodb=lambda: world.dynamodb,
        visibility_timeout=lambda: visibility,
        clock=clock,
        epoch_ms=lambda: 1_000_000_000_000,
    )


def _outgoing(index: int) -> Outgoing:
    return Outgoing("analyze", Envelope(id=f"e-{index}", route=Route([], "analyze", []), payload={"i": index}))


KEY = HopKey("t-g", "normalize", 0, 1)


def test_first_delivery_sends_then_writes_one_item_per_frame_in_one_request(world: Mesh) -> None:
    """GW-DATA-8: the common path costs one ``BatchWriteItem`` (one write unit per frame) and no claim."""
    calls = Calls(world.dynamodb)
    sent: list[list[str]] = []
    guard = _ledger(world).guard(KEY, Delivery(1, 1_000_000_000_000 - 1000), None)
    guard.send([_outgoing(0), _outgoing(1)], lambda batch: sent.append([o.envelope.id for o in batch]))
    assert sent == [["e-0", "e-1"]]
    assert calls.names == ["BatchWriteItem"]
    assert [w["PutRequest"]["Item"]["sk"]["S"] for w in calls.writes] == ["FRAME#0", "FRAME#1"]


def test_late_first_delivery_claims_before_sending(world: Mesh) -> None:
    """Received half a visibility timeout ago or more: SQS may already have redelivered it, so frames are claimed."""
    calls = Calls(world.dynamodb)
    guard = _ledger(world, visibility=60).guard(KEY, Delivery(1, 1_000_000_000_000 - 30_000), None)
    guard.send([_outgoing(0)], lambda batch: None)
    assert calls.names == ["PutItem", "BatchWriteItem"]
    assert world.idem_items(KEY)["FRAME#0"]["state"]["S"] == SENT


def test_frame_claimed_by_a_live_run_is_held_back_and_the_record_fails(world: Mesh) -> None:
    ledger = _ledger(world)
    assert ledger.claim(KEY, 0) is None  # another container claimed frame 0 and is sending it
    sent: list[str] = []
    guard = ledger.guard(KEY, Delivery(2, None), None)
    with pytest.raises(DuplicateInFlightError, match=r"frames \[0\] of hop IDEM#t-g#normalize#0#1"):
        guard.send([_outgoing(0), _outgoing(1)], lambda batch: sent.extend(o.envelope.id for o in batch))
    assert sent == ["e-1"], "the other frames still leave"
    items = world.idem_items(KEY)
    assert items["FRAME#0"]["state"]["S"] == CLAIMED
    assert items["FRAME#1"]["state"]["S"] == SENT


def test_claim_left_by_a_dead_run_is_taken_over_after_the_lease(world: Mesh) -> None:
    assert _ledger(world).claim(KEY, 0) is None
    later = NOW + timedelta(seconds=61)
    sent: list[str] = []
    _ledger(world, clock=lambda: later).guard(KEY, Delivery(3, None), None).send(
        [_outgoing(0)], lambda batch: sent.extend(o.envelope.id for o in batch)
    )
    assert sent == ["e-0"]


@pytest.mark.parametrize(
    ("visibility", "age", "taken_over"),
    [(40, 20.5, True), (40, 19.5, False), (18, 10.5, True), (18, 9.5, False), (900, 61, True), (900, 59, False)],
)
def test_claim_lease_is_half_the_visibility_timeout_between_10_and_60_seconds(
    world: Mesh, visibility: int, age: float, taken_over: bool
) -> None:
    """With an 18 s visibility timeout SQS redelivers every ~18 s: a 60 s lease would see the message exhaust its
    receives and reach the DLQ before a dead run's claim expired."""
    assert _ledger(world, visibility=visibility).claim(KEY, 0) is None
    later = NOW + timedelta(seconds=age)
    state = _ledger(world, clock=lambda: later, visibility=visibility).claim(KEY, 0)
    assert (state is None) is taken_over, state


def test_failed_send_releases_the_claims_so_the_redelivery_can_send(world: Mesh) -> None:
    ledger = _ledger(world)

    def broken(batch: list[Outgoing]) -> None:
        raise TransportError("SendMessageBatch failed")

    with pytest.raises(TransportError):
        ledger.guard(KEY, Delivery(2, None), None).send([_outgoing(0)], broken)
    assert world.idem_items(KEY) == {}
    sent: list[str] = []
    ledger.guard(KEY, Delivery(3, None), None).send([_outgoing(0)], lambda b: sent.extend(o.envelope.id for o in b))
    assert sent == ["e-0"]


def test_frame_zero_known_at_preflight_is_skipped_without_a_request(world: Mesh) -> None:
    calls = Calls(world.dynamodb)
    sent: list[Outgoing] = []
    _ledger(world).guard(KEY, Delivery(1, None), SENT).send([_outgoing(0)], sent.extend)
    assert sent == [] and calls.names == []


def test_preflight_reads_statuses_and_first_frames_in_one_request(world: Mesh, handlers: Any) -> None:
    """GW-DATA-8: one ``BatchGetItem`` per SQS batch carries the task pre-flight and the idempotency check."""
    actor = Actor(world.mesh, "echo")
    world.store.create_task(task_id="t-a", actor="normalize")
    world.send("normalize", envelope("t-a"))
    world.send("normalize", envelope("t-b"))
    messages = world.receive("normalize", 2)
    calls = Calls(world.dynamodb)
    assert actor.handle(messages) == []
    assert calls.names.count("BatchGetItem") == 1
    assert "GetItem" not in calls.names and "Query" not in calls.names
    idem_writes = [w for w in calls.writes if w["PutRequest"]["Item"]["pk"]["S"].startswith("IDEM#")]
    assert len(idem_writes) == 2  # one item per hop's single frame


def test_delivery_reads_the_lambda_record_attributes() -> None:
    record = {"attributes": {"ApproximateReceiveCount": "3", "ApproximateFirstReceiveTimestamp": "1700000000000"}}
    assert Delivery.of(record) == Delivery(3, 1_700_000_000_000)
    assert Delivery.of({"attributes": {"ApproximateReceiveCount": ""}}) == Delivery(1, None)
    assert Delivery.of({}) == Delivery(1, None)


class DynamoDbLimits:
    """The moto client with two rules of DynamoDB that moto does not apply to ``BatchWriteItem``: at most 25 requests
    per call (else ``ValidationException``), and a busy table that leaves some requests unprocessed."""

    def __init__(self, client: Any, *, unprocessed_first: int) -> None:
        self._client = client
        self._unprocessed = unprocessed_first
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def batch_write_item(self, *, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:
        [(table, requests)] = RequestItems.items()
        self.sizes.append(len(requests))
        if len(requests) > 25:
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "Too many items requested"}}, "BatchWriteItem"
            )
        kept, self._unprocessed = requests[: len(requests) - self._unprocessed], 0
        self._client.batch_write_item(RequestItems={table: kept})
        left = requests[len(kept) :]
        return {"UnprocessedItems": {table: left} if left else {}}


def test_gw_data_8_frame_items_are_written_25_at_a_time_and_unprocessed_ones_retried(world: Mesh) -> None:
    """A hop of 30 frames: two requests within DynamoDB's 25-item limit, the items a busy table left unprocessed are
    sent again after a pause, and every frame ends up recorded (P-ACK-8)."""
    limited = DynamoDbLimits(world.dynamodb, unprocessed_first=4)
    sleeps: list[float] = []
    ledger = Idempotency(
        table=world.table,
        dynamodb=lambda: limited,
        visibility_timeout=lambda: 300,
        clock=lambda: NOW,
        epoch_ms=lambda: 1_000_000_000_000,
        sleep=sleeps.append,
    )
    ledger.mark_sent_all([(KEY, range(30))])
    assert limited.sizes == [25, 4, 5]
    assert len(sleeps) == 1
    assert sorted(world.idem_items(KEY), key=lambda sk: int(sk.removeprefix("FRAME#"))) == [
        f"FRAME#{k}" for k in range(30)
    ]
