"""The frames of one SQS batch leave together (``asya.outbox``) through ``ActorRuntime.handle`` against moto
(PROTOCOL P-ROUTE-9, P-ROUTE-10, P-ACK-2, P-ACK-3, P-ACK-8; GATEWAY GW-DATA-8). Revision 2: the hop's one write is its
claim, before the handler call; nothing is written after the send (no idempotency items).

Requests are counted with botocore events on the runtime's own clients; a failing ``SendMessageBatch`` entry is
moto's own answer to an entry whose ``DelaySeconds`` is out of range (set by a ``provide-client-params`` hook on the
entry of one envelope).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asya.store import records as rec
from tests.functional.actors import NOW, Context, Harness, envelope, fail_one_record

pytestmark = pytest.mark.functional


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, **kwargs: Any) -> Harness:
        return Harness(mesh, handler, clock=lambda: NOW, **kwargs)

    return make


class Calls:
    """Every SQS and DynamoDB request a runtime makes after :meth:`start`, in order, with its parameters."""

    def __init__(self, h: Harness) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []
        self._on = False
        h.sqs.meta.events.register("provide-client-params.sqs.*", self._record)
        h.mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.*", self._record)

    def start(self) -> None:
        self._on = True

    def stop(self) -> None:
        self._on = False

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if self._on:
            self.log.append((model.name, params))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [params for op, params in self.log if op == name]

    def position(self, name: str) -> list[int]:
        return [i for i, (op, _) in enumerate(self.log) if op == name]


def _ids(params: dict[str, Any]) -> list[str]:
    return [json.loads(e["MessageBody"])["id"] for e in params["Entries"]]


def _run(h: Harness, calls: Calls, *bodies: dict[str, Any]) -> list[str]:
    """Handle ``bodies`` as one batch with the calls recorded; the indexes of the failed records."""
    event = h.event(*bodies)
    calls.start()
    response = h.runtime.handle(event, Context())
    calls.stop()
    ids = [r["messageId"] for r in event["Records"]]
    return [str(ids.index(f["itemIdentifier"])) for f in response["batchItemFailures"]]


def _task_item(h: Harness, task_id: str) -> dict[str, Any]:
    item: dict[str, Any] = h.mesh.aws.dynamodb.get_item(
        TableName=h.mesh.resources.table, Key=rec.key(task_id, rec.TASK_SK), ConsistentRead=True
    )["Item"]
    return item


_DYNAMODB_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


def test_p_route_9_ten_one_frame_records_leave_in_one_send_message_batch(harness: Callable[..., Harness]) -> None:
    """GW-DATA-8 (R2): ten tracked one-frame records to one next actor cost one pre-flight ``BatchGetItem``, one
    claim ``UpdateItem`` each before its handler call, and one ``SendMessageBatch``; nothing is written after the
    send. The runtime's clock stands still: on a loaded box ten claims can outlast FRAME_MAX_WAIT, and the ticker
    would then rightly send the waiting frames early, in two calls."""
    h = harness("echo", monotonic=lambda: 1000.0)
    calls = Calls(h)
    ids = [f"t-b{i}" for i in range(10)]
    for task_id in ids:
        h.store.create_task(task_id=task_id, actor="normalize")
    assert _run(h, calls, *(envelope(i) for i in ids)) == []
    [send] = calls.named("SendMessageBatch")
    assert _ids(send) == ids, "one entry per record, in batch order"
    assert calls.named("SendMessage") == []
    assert len(calls.named("BatchGetItem")) == 1
    claims = calls.named("UpdateItem")
    assert sorted(c["Key"]["pk"]["S"] for c in claims) == sorted(f"TASK#{i}" for i in ids)
    assert all("#fence_h" in c["ExpressionAttributeNames"] for c in claims)
    writes = [i for i, (op, _) in enumerate(calls.log) if op in _DYNAMODB_WRITES]
    assert len(writes) == 10 and max(writes) < min(calls.position("SendMessageBatch")), "claims only, before the send"
    assert sorted(o["id"] for o in h.drain("analyze")) == sorted(ids)


def test_p_ack_3_failing_entry_fails_only_its_record(harness: Callable[..., Harness]) -> None:
    """P-ROUTE-10, P-ACK-2/3: an entry still failing after its retries fails its own record; the records whose
    entries went out in the same requests are acked and keep their claims; the failed record releases its lease
    (P-ACK-8), so its redelivery is not held off. The runtime's clock stands still, so the three frames wait for the
    batch's end however long the claims take (past FRAME_MAX_WAIT the ticker would send them early)."""
    h = harness("echo", monotonic=lambda: 1000.0)
    calls = Calls(h)
    for task_id in ("t-ok0", "t-bad", "t-ok2"):
        h.store.create_task(task_id=task_id, actor="normalize")

    def poison(params: dict[str, Any], **_: Any) -> None:
        for entry in params["Entries"]:
            if json.loads(entry["MessageBody"])["id"] == "t-bad":
                entry["DelaySeconds"] = 901  # moto answers this entry in ``Failed``, every time

    h.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", poison)
    failed = _run(h, calls, envelope("t-ok0"), envelope("t-bad"), envelope("t-ok2"))
    assert failed == ["1"]
    sends = calls.named("SendMessageBatch")
    assert _ids(sends[0]) == ["t-ok0", "t-bad", "t-ok2"]
    assert [_ids(s) for s in sends[1:]] == [["t-bad"]] * 3, "only the failing entry is retried, 3 times"
    assert sorted(o["id"] for o in h.drain("analyze")) == ["t-ok0", "t-ok2"]
    for task_id in ("t-ok0", "t-ok2"):
        item = _task_item(h, task_id)
        assert (item["fence_h"]["N"], item["fence_a"]["N"]) == ("1", "1")
        assert int(item["lease_until"]["N"]) > rec.epoch_ms(NOW), "the lease of a run that finished its hop"
    bad = _task_item(h, "t-bad")
    assert (bad["fence_h"]["N"], bad["fence_a"]["N"], bad["lease_until"]["N"]) == ("1", "1", "0"), "released"
    assert calls.named("BatchWriteItem") == []
    # the redelivery claims again at once and its frame leaves
    h.sqs.meta.events.unregister("provide-client-params.sqs.SendMessageBatch", poison)
    assert _run(h, calls, envelope("t-bad")) == []
    assert [o["id"] for o in h.drain("analyze")] == ["t-bad"]


def test_p_ack_2_records_without_time_left_do_not_hold_back_the_sent_ones(harness: Callable[..., Harness]) -> None:
    """An unstarted record (P-TIME-6) fails alone; the frames of the records that ran still leave together."""
    h = harness("echo")
    calls = Calls(h)
    event = h.event(envelope("t-s0"), envelope("t-s1"))
    calls.start()
    response = h.runtime.handle(event, Context(remaining_ms=20_000))  # room for the first record only
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [event["Records"][1]["messageId"]]
    assert [_ids(s) for s in calls.named("SendMessageBatch")] == [["t-s0"]]


@pytest.fixture
def outbox_handlers(harness: Callable[..., Harness]) -> Iterator[Harness]:
    h = harness("echo", env={"ASYA_HANDLER": "outbox_handlers.fan_or_wait"})
    module = sys.modules["outbox_handlers"]
    module.EARLIER_SENT.clear()
    yield h
    module.EARLIER_SENT.set()  # never leave a waiting handler behind
    module.EARLIER_SENT.clear()


def test_p_route_9_fan_out_frames_leave_while_a_later_record_is_still_running(outbox_handlers: Harness) -> None:
    """Frames waiting for the end of the batch leave no later than ``FRAME_MAX_WAIT`` after they were queued,
    even while a later record's handler is busy: they do not wait for that record to finish. Frame 0, which keeps
    the input id, leaves after the children (R2), and it too does not wait for the later record."""
    h = outbox_handlers
    calls = Calls(h)
    module = sys.modules["outbox_handlers"]
    fan_batches: list[list[str]] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        bodies = [json.loads(e["MessageBody"]) for e in params["Entries"]]
        lineage = [b["id"] for b in bodies if "t-fan" in (b["id"], b.get("parent_id"))]
        if lineage:
            fan_batches.append(lineage)
        if "t-fan" in lineage:
            module.EARLIER_SENT.set()

    h.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", watch)
    failed = _run(h, calls, envelope("t-fan", payload={"text": "a b c"}), envelope("t-slow", payload={"wait": True}))
    assert failed == []
    outs = {o["id"]: o for o in h.drain("analyze")}
    assert outs["t-slow"]["payload"] == {"earlier_sent_while_running": True}
    fan_ids = [i for batch in fan_batches for i in batch]
    assert len(fan_ids) == 3 and "t-slow" not in fan_ids, "the fan-out's frames left on their own, first"
    assert fan_ids[-1] == "t-fan", "frame 0 last"
    assert _ids(calls.named("SendMessageBatch")[-1]) == ["t-slow"]


def test_p_route_10_frame_failing_after_its_record_ended_is_logged(harness: Callable[..., Harness]) -> None:
    """P-ROUTE-10, P-ACK-3: a frame still failing when the outbox sends it after its record's handler call ended fails
    that record at the end of the batch; one WARNING line names the record and the error (no traceback)."""
    h = harness("echo")

    def poison(params: dict[str, Any], **_: Any) -> None:
        for entry in params["Entries"]:
            if json.loads(entry["MessageBody"])["id"] == "t-late":
                entry["DelaySeconds"] = 901  # moto answers this entry in ``Failed``, every time

    h.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", poison)
    failed = fail_one_record(h, envelope("t-late"))
    assert failed.__dict__["error_type"] == "asya.transport.TransportError"
    assert "still failing after 3 retries" in failed.__dict__["error"]
