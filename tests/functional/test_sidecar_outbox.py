"""The frames of one SQS batch leave together (``asya.outbox``) through ``ActorRuntime.handle`` against moto
(PROTOCOL P-ROUTE-9, P-ROUTE-10, P-ACK-2, P-ACK-3, P-ACK-8; GATEWAY GW-DATA-8).

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

from asya.idempotency import SENT, HopKey
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


def _frame0(h: Harness, env_id: str) -> dict[str, Any] | None:
    key = HopKey(env_id, h.actor, 0, 1)
    item = h.mesh.aws.dynamodb.get_item(TableName=h.mesh.resources.table, Key=key.frame_key(0), ConsistentRead=True)
    return item.get("Item")


def test_p_route_9_ten_one_frame_records_leave_in_one_send_message_batch(harness: Callable[..., Harness]) -> None:
    """GW-DATA-8: ten one-frame records to one next actor cost one ``SendMessageBatch`` and, after it, one
    ``BatchWriteItem`` with the ten idempotency items (P-ACK-8: written after the send succeeded)."""
    h = harness("echo")
    calls = Calls(h)
    ids = [f"t-b{i}" for i in range(10)]
    assert _run(h, calls, *(envelope(i) for i in ids)) == []
    [send] = calls.named("SendMessageBatch")
    assert _ids(send) == ids, "one entry per record, in batch order"
    assert calls.named("SendMessage") == []
    [write] = calls.named("BatchWriteItem")
    written = [r["PutRequest"]["Item"] for r in write["RequestItems"][h.mesh.resources.table]]
    assert sorted(item["pk"]["S"] for item in written) == sorted(HopKey(i, "normalize", 0, 1).pk for i in ids)
    assert {item["state"]["S"] for item in written} == {SENT}
    assert calls.position("SendMessageBatch") < calls.position("BatchWriteItem"), "items only after the send"
    assert sorted(o["id"] for o in h.drain("analyze")) == sorted(ids)


def test_p_ack_3_failing_entry_fails_only_its_record(harness: Callable[..., Harness]) -> None:
    """P-ROUTE-10, P-ACK-2/3: an entry still failing after its retries fails its own record; the records whose
    entries went out in the same requests are acked and their items written; the failed one gets none."""
    h = harness("echo")
    calls = Calls(h)

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
    assert _frame0(h, "t-ok0") is not None and _frame0(h, "t-ok2") is not None
    assert _frame0(h, "t-bad") is None, "no item for a frame that did not leave (P-ACK-8)"
    assert len(calls.named("BatchWriteItem")) == 1


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
    even while a later record's handler is busy: they do not wait for that record to finish."""
    h = outbox_handlers
    calls = Calls(h)
    module = sys.modules["outbox_handlers"]
    fan_ids: list[str] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        ids = _ids(params)
        if "t-fan" in ids:
            fan_ids.extend(ids)
            module.EARLIER_SENT.set()

    h.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", watch)
    failed = _run(h, calls, envelope("t-fan", payload={"text": "a b c"}), envelope("t-slow", payload={"wait": True}))
    assert failed == []
    outs = {o["id"]: o for o in h.drain("analyze")}
    assert outs["t-slow"]["payload"] == {"earlier_sent_while_running": True}
    assert len(fan_ids) == 3 and "t-slow" not in fan_ids, "the fan-out's frames left on their own, first"
    assert [_ids(s)[0] for s in calls.named("SendMessageBatch")] == ["t-fan", "t-slow"]


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
