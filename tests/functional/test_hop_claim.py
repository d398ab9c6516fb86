"""The delivery guarantee of revision 2, tested on the hop claim (PROTOCOL P-ACK-7, P-ACK-8, P-RES-8, P-RES-10,
P-ROUTE-9, P-FAN-2, P-FAN-3, P-STAT-10, P-STAT-12).

Each test drives actor runtimes directly against moto and asserts three things: what the handler saw (``CALLS``),
what was sent (the queues), and the final state of the task's items. A "crash" is the invocation dying: a
``BaseException`` the layer never catches, or an ack that never reaches SQS (the record is left in flight, its lease
live). Time is a clock the test moves: a claim's lease runs to the invocation's deadline (the context's remaining
time, 300 s here) + 10 s.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya import routing
from asya.envelope import parse_envelope
from tests.functional import actors
from tests.functional.actors import NOW, Context, envelope

pytestmark = pytest.mark.functional

#: Past every lease a run of these tests takes: 300 s of Lambda time + 10 s.
PAST_LEASE = timedelta(seconds=311)
RETRY = {"policies": {"default": {"max_attempts": 3, "initial_delay": 0, "jitter": False}}}


class Harness(actors.Harness):
    """An actor of ``claim_handlers`` on a clock the test moves; ``handle`` acks like the ESM (deletes the message)
    unless told the ack is lost."""

    def __init__(self, mesh: Any, handler: str, clock: list[datetime], **kwargs: Any) -> None:
        super().__init__(mesh, handler, module="claim_handlers", clock=lambda: clock[0], **kwargs)

    def handle(self, *bodies: dict[str, Any], ack: bool = True) -> list[int]:
        """Deliver ``bodies`` as one batch; the positions of the failed records."""
        event = self.event(*bodies)
        response = self.runtime.handle(event, Context())
        ids = [r["messageId"] for r in event["Records"]]
        failed = [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]]
        if ack:
            for position, record in enumerate(event["Records"]):
                if position not in failed:
                    self.sqs.delete_message(QueueUrl=self.url(self.actor), ReceiptHandle=record["receiptHandle"])
        return failed

    def task_item(self, task_id: str) -> dict[str, Any]:
        key = {"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": "TASK"}}
        item: dict[str, Any] = self.mesh.aws.dynamodb.get_item(TableName=self.mesh.resources.table, Key=key)["Item"]
        return item

    def fence(self, task_id: str, sk: str = "TASK") -> tuple[int, int, int]:
        key = {"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": sk}}
        item = self.mesh.aws.dynamodb.get_item(TableName=self.mesh.resources.table, Key=key)["Item"]
        return int(item["fence_h"]["N"]), int(item["fence_a"]["N"]), int(item["lease_until"]["N"])


@pytest.fixture
def clock() -> list[datetime]:
    return [NOW]


def _handlers() -> Any:
    """``claim_handlers`` as the layer loaded it (through ``ASYA_CODE_DIR``, a top-level module)."""
    return sys.modules["claim_handlers"]


def _reset() -> None:
    if "claim_handlers" in sys.modules:
        _handlers().CALLS.clear()
        _handlers().CRASH_NEXT.clear()


@pytest.fixture
def make(mesh: Any, clock: list[datetime]) -> Iterator[Callable[..., Harness]]:
    _reset()

    def build(handler: str = "echo", **kwargs: Any) -> Harness:
        return Harness(mesh, handler, clock, **kwargs)

    yield build
    _reset()


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_p_ack_8_the_claim_is_the_hops_one_write_fence_lease_and_running_status(make: Callable[..., Harness]) -> None:
    h = make()
    h.store.create_task(task_id="t-claim", actor="normalize", payload={"text": "x"})
    before = int(h.task_item("t-claim")["last_seq"]["N"])
    writes: list[str] = []
    h.mesh.aws.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: writes.append(model.name), unique_id="claim-count"
    )
    try:
        assert h.handle(envelope("t-claim")) == []
    finally:
        h.mesh.aws.dynamodb.meta.events.unregister("before-call.dynamodb", unique_id="claim-count")
    assert [w for w in writes if w not in ("BatchGetItem", "GetItem", "Query")] == ["UpdateItem"]
    item = h.task_item("t-claim")
    assert (item["status"]["S"], item["step"]["S"], item["current_actor"]["S"]) == (
        "running",
        "processing",
        "normalize",
    )
    assert int(item["last_seq"]["N"]) == before + 1
    assert h.fence("t-claim") == (1, 1, _ms(NOW) + 300_000 + 10_000)
    assert len(_handlers().CALLS) == 1
    [out] = h.drain("analyze")
    assert out["id"] == "t-claim"


def test_p_ack_7_a_redelivery_after_the_next_hop_claimed_is_acked_without_a_call(make: Callable[..., Harness]) -> None:
    first, second = make(), make(actor="analyze")
    first.store.create_task(task_id="t-dup", actor="normalize", payload={"text": "x"})
    env = envelope("t-dup")
    assert first.handle(env) == []
    [out] = first.drain("analyze")
    assert second.handle(out) == []  # the next hop claims (2, 1)
    assert second.fence("t-dup")[:2] == (2, 1)
    _handlers().CALLS.clear()

    assert first.handle(env) == []  # the late duplicate: acked
    assert _handlers().CALLS == []
    assert first.drain("analyze") == []
    assert second.fence("t-dup")[:2] == (2, 1)


def test_p_ack_8_a_duplicate_under_a_live_lease_comes_back_when_the_lease_ends(
    make: Callable[..., Harness], clock: list[datetime]
) -> None:
    h = make()
    h.store.create_task(task_id="t-live", actor="normalize", payload={"text": "x"})
    env = envelope("t-live")
    assert h.handle(env) == []
    changes: list[dict[str, Any]] = []
    h.sqs.meta.events.register(
        "before-parameter-build.sqs.ChangeMessageVisibilityBatch", lambda params, **_: changes.append(params)
    )
    assert h.handle(env) == [0]  # held: the record fails
    assert len(_handlers().CALLS) == 1
    [[entry]] = [c["Entries"] for c in changes]
    assert entry["VisibilityTimeout"] == 310  # the lease's remaining time, not the usual backoff (P-ACK-4)
    assert len(h.drain("analyze")) == 1


def test_p_ack_7_two_copies_in_one_batch_run_the_handler_once(make: Callable[..., Harness]) -> None:
    h = make()
    h.store.create_task(task_id="t-twice", actor="normalize", payload={"text": "x"})
    env = envelope("t-twice")
    assert h.handle(env, env) == []  # the second copy is a duplicate, acked
    assert len(_handlers().CALLS) == 1
    assert [m["id"] for m in h.drain("analyze")] == ["t-twice"]


def test_p_ack_7_interleaved_runs_of_one_hop_call_the_handler_once(mesh: Any, make: Callable[..., Harness]) -> None:
    one, two = make("gated"), make("gated")
    one.store.create_task(task_id="t-race", actor="normalize", payload={"text": "x"})
    env = envelope("t-race")
    gate = _handlers().Gate()
    _handlers().GATES.put(gate)
    result: list[list[int]] = []
    runner = threading.Thread(target=lambda: result.append(one.handle(env)))
    runner.start()
    try:
        assert gate.entered.wait(10), "the first run never reached the handler"
        assert two.handle(env) == [0]  # the other run holds the hop: this copy fails and comes back later
    finally:
        gate.release.set()
        runner.join(10)
    assert result == [[]]
    assert len(_handlers().CALLS) == 1
    assert [m["id"] for m in one.drain("analyze")] == ["t-race"]


def test_p_ack_7_a_crash_after_the_sends_lets_the_downstream_handler_run_once(
    make: Callable[..., Harness], clock: list[datetime]
) -> None:
    first, second = make(), make(actor="analyze")
    first.store.create_task(task_id="t-lost-ack", actor="normalize", payload={"text": "x"})
    env = envelope("t-lost-ack", deadline=NOW + timedelta(hours=1))
    assert first.handle(env, ack=False) == []  # sent, but the ack never reached SQS
    clock[0] = NOW + PAST_LEASE
    assert first.handle(env) == []  # redelivered after the lease: the crashed hop runs again (P-ACK-7 allows it)
    copies = first.drain("analyze")
    assert [c["id"] for c in copies] == ["t-lost-ack", "t-lost-ack"]
    _handlers().CALLS.clear()

    assert second.handle(copies[0]) == []
    assert second.handle(copies[1]) == [0]  # held by the first copy's live claim
    assert len(_handlers().CALLS) == 1
    first.store.report_final("t-lost-ack", status="succeeded", result={"done": True}, writer_id="sink-message")
    clock[0] += PAST_LEASE
    assert second.handle(copies[1]) == []  # the task finished: a duplicate, acked
    assert len(_handlers().CALLS) == 1
    assert first.store.get_task("t-lost-ack")["result"] == {"done": True}  # type: ignore[index]


def test_p_ack_7_a_crash_before_the_sends_is_finished_by_the_redelivery_after_the_lease(
    make: Callable[..., Harness], clock: list[datetime]
) -> None:
    h = make()
    h.store.create_task(task_id="t-crash", actor="normalize", payload={"text": "x"})
    env = envelope("t-crash", deadline=NOW + timedelta(hours=1))
    _handlers().CRASH_NEXT.append(True)
    with pytest.raises(_handlers().Crash):
        h.handle(env, ack=False)
    assert h.drain("analyze") == []
    assert h.handle(env, ack=False) == [0]  # redelivered too early: the dead run's lease still holds the hop
    assert len(_handlers().CALLS) == 1
    clock[0] = NOW + PAST_LEASE
    assert h.handle(env) == []
    assert len(_handlers().CALLS) == 2
    [out] = h.drain("analyze")
    assert out["id"] == "t-crash"
    assert h.fence("t-crash")[:2] == (1, 1)


def test_p_res_8_the_retry_takes_a_higher_fence_and_a_late_duplicate_of_the_failed_attempt_finds_it(
    make: Callable[..., Harness],
) -> None:
    h = make("boom", env={"ASYA_RESILIENCY": json.dumps(RETRY)})
    h.store.create_task(task_id="t-retry", actor="normalize", payload={"text": "x"})
    env = envelope("t-retry")
    assert h.handle(env) == []
    [retry] = h.drain("normalize")
    assert retry["status"]["attempt"] == 2
    assert h.fence("t-retry") == (1, 2, 0)  # (h, n + 1), lease 0: the retry's own claim will find it passed
    assert h.task_item("t-retry")["step"]["S"] == "retrying"

    assert h.handle(env) == []  # a late duplicate of attempt 1: acked, no second retry chain
    assert len(_handlers().CALLS) == 1
    assert h.drain("normalize") == []

    assert h.handle(retry) == []  # attempt 2 claims (1, 2) and runs
    assert len(_handlers().CALLS) == 2
    [again] = h.drain("normalize")
    assert again["status"]["attempt"] == 3
    assert h.fence("t-retry")[:2] == (1, 3)


def _failing_children(h: Harness) -> Callable[[], None]:
    """Make SendMessageBatch fail while the returned switch was not flipped: a throttled SQS, as a child send sees
    it after the transport's retries."""
    state = {"failing": True}

    def fail(params: dict[str, Any], **_: Any) -> None:
        if state["failing"] and any('"part":1' in e["MessageBody"] for e in params["Entries"]):
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "throttled"}}, "SendMessageBatch")

    h.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", fail)
    return lambda: state.update(failing=False)


def test_p_route_9_a_failed_child_send_never_strands_a_child_frame_0_leaves_last(make: Callable[..., Harness]) -> None:
    h = make("fan_out")
    h.store.create_task(task_id="t-fan", actor="normalize", payload={"text": "x"})
    env = envelope("t-fan")
    recover = _failing_children(h)
    assert h.handle(env) == [0]  # a child could not be sent: the record fails...
    assert [m["id"] for m in h.drain("analyze") if m["id"] == "t-fan"] == []  # ...and frame 0 never left
    assert h.fence("t-fan")[2] == 0  # failed without a crash: the lease is released

    recover()
    assert h.handle(env) == []  # the redelivery runs the hop again at once
    sent = h.drain("analyze")
    entry = routing.entry_update(parse_envelope(json.dumps(env)), "normalize", "2026-03-01T10:00:00Z")
    children = {routing.child_id(entry, 1), routing.child_id(entry, 2)}
    assert sent[-1]["id"] == "t-fan"  # frame 0 last
    assert [m["id"] for m in sent].count("t-fan") == 1
    assert {m["id"] for m in sent[:-1]} == children  # the same child ids as the first run (P-FAN-2)
    assert all(m["parent_id"] == "t-fan" for m in sent[:-1])
    assert len(_handlers().CALLS) == 2


def test_p_fan_3_children_claim_their_own_items_and_never_write_the_task(make: Callable[..., Harness]) -> None:
    split, after = make("fan_out"), make(actor="analyze")
    split.store.create_task(task_id="t-kids", actor="normalize", payload={"text": "x"})
    assert split.handle(envelope("t-kids")) == []
    sent = split.drain("analyze")
    child = next(m for m in sent if m["id"] != "t-kids")
    task_before = split.task_item("t-kids")
    _handlers().CALLS.clear()

    assert after.handle(child) == []
    assert after.fence("t-kids", f"CHILD#{child['id']}")[:2] == (2, 1)
    assert after.handle(child) == [0]  # a second copy while the child's claim is live
    assert len(_handlers().CALLS) == 1
    task_after = split.task_item("t-kids")
    assert task_after["last_seq"] == task_before["last_seq"]  # no status write by a child (P-FAN-3)
    assert task_after["fence_h"] == task_before["fence_h"]
    view = split.store.get_task("t-kids")
    assert view is not None
    node = next(c for c in view["children"] if c["id"] == child["id"])
    assert (node["status"], node["current_actor"], node["hop"], node["attempt"]) == ("running", "analyze", 2, 1)


def test_p_stat_10_the_root_envelope_of_a_finished_task_is_acked_unprocessed(make: Callable[..., Harness]) -> None:
    h = make()
    h.store.create_task(task_id="t-done", actor="normalize", payload={"text": "x"})
    assert h.store.report_final("t-done", status="failed", error="gave up", writer_id="m-1")
    assert h.handle(envelope("t-done")) == []
    assert _handlers().CALLS == []
    assert h.drain("analyze") == [] and h.drain("x-sink") == []
    assert "fence_h" not in h.task_item("t-done")


def test_p_stat_12_a_stealth_envelope_claims_nothing_and_may_run_twice(make: Callable[..., Harness]) -> None:
    h = make()
    h.store.create_task(task_id="t-quiet", actor="normalize", payload={"text": "x"})
    before = h.task_item("t-quiet")
    env = envelope("t-quiet", headers={"x-asya-mesh-status": "off"})
    assert h.handle(env) == []
    assert h.handle(env) == []
    assert len(_handlers().CALLS) == 2
    assert len(h.drain("analyze")) == 2
    assert h.task_item("t-quiet") == before  # no fence, no status, no last_seq change


def test_p_res_10_an_error_after_a_frame_is_a_partial_failure_sent_and_never_retried(
    make: Callable[..., Harness],
) -> None:
    h = make("fail_after_frames", env={"ASYA_RESILIENCY": json.dumps(RETRY)})
    h.store.create_task(task_id="t-partial", actor="normalize", payload={"text": "x"})
    assert h.handle(envelope("t-partial")) == []
    sent = h.drain("analyze")
    assert len(sent) == 2 and sent[-1]["id"] == "t-partial"  # every yielded frame, frame 0 last
    assert h.drain("normalize") == []  # never retried
    [notice] = h.drain("x-sump")
    assert (notice["status"]["phase"], notice["status"]["reason"]) == ("failed", "PartialFailure")
    assert notice["status"]["error"]["frames_sent"] == 2
    assert notice["payload"]["details"]["error_type"] == "RuntimeError"
    assert len(_handlers().CALLS) == 1
    task = h.store.get_task("t-partial")
    assert task is not None and task["status"] == "running"  # the task follows frame 0: no final status
