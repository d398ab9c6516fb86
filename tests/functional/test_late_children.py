"""Late copies of a fan-out child's hops (PROTOCOL P-ACK-7 (R3), P-STAT-10 (R3), P-CKPT-1; issue 25, defects 4, 5).

Children are fenced like roots: a copy of a child's envelope whose task has ended is acked without a handler call,
and a child hop that completed (its last hop reached x-sink or a fan-in aggregator) is done, so a copy of it finds the
child's fence item marked finished. A finished child is never failed later: no second checkpoint line for it.
Time is a clock the test moves; a lease runs to the invocation's deadline (300 s of Lambda time) + 10 s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.functional import actors
from tests.functional.actors import NOW, Context, envelope, run_sink
from tests.functional.test_fanin import AGG, Clock, Flow

pytestmark = pytest.mark.functional

PAST_LEASE = timedelta(seconds=311)


class Harness(actors.Harness):
    """An actor of ``claim_handlers`` on a clock the test moves; ``handle`` acks like the ESM."""

    def __init__(self, mesh: Any, handler: str, clock: list[datetime], **kwargs: Any) -> None:
        super().__init__(mesh, handler, module="claim_handlers", clock=lambda: clock[0], **kwargs)

    def handle(self, *bodies: dict[str, Any]) -> list[int]:
        event = self.event(*bodies)
        response = self.runtime.handle(event, Context())
        ids = [r["messageId"] for r in event["Records"]]
        failed = [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]]
        for position, record in enumerate(event["Records"]):
            if position not in failed:
                self.sqs.delete_message(QueueUrl=self.url(self.actor), ReceiptHandle=record["receiptHandle"])
        return failed


def _calls() -> list[Any]:
    calls: list[Any] = sys.modules["claim_handlers"].CALLS
    return calls


@pytest.fixture
def clock() -> Iterator[list[datetime]]:
    yield [NOW]
    if "claim_handlers" in sys.modules:
        _calls().clear()


def _lines(mesh: Any, envelope_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Every checkpoint line written for ``envelope_id``: (phase, line)."""
    s3, bucket = mesh.aws.s3, mesh.resources.bucket
    out = []
    for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
        phase = obj["Key"].partition("/")[0]
        if phase not in ("succeeded", "failed"):
            continue
        text = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode("utf-8")
        out += [(phase, line) for line in map(json.loads, text.split("\n")[:-1]) if line.get("id") == envelope_id]
    return out


def _fan_out(mesh: Any, clock: list[datetime], task_id: str) -> tuple[Harness, Harness, dict[str, Any]]:
    """``normalize`` (fan_out) -> ``analyze`` (echo) -> x-sink: the task is created and split; one child envelope at
    ``analyze`` is returned, not yet run."""
    split, after = Harness(mesh, "fan_out", clock), Harness(mesh, "echo", clock, actor="analyze")
    split.store.create_task(task_id=task_id, actor="normalize", payload={"text": "x"})
    assert split.handle(envelope(task_id)) == []
    sent = split.drain("analyze")
    child = next(m for m in sent if m["id"] != task_id)
    assert child["parent_id"] == task_id
    return split, after, child


def _finish_child(mesh: Any, clock: list[datetime], after: Harness, child: dict[str, Any]) -> None:
    """Run the child's last hop and x-sink on what it sent: the child's succeeded line is written."""
    assert after.handle(child) == []
    [done] = after.drain("x-sink")
    assert done["id"] == child["id"]
    assert run_sink(mesh, [done], clock=lambda: clock[0])["batchItemFailures"] == []
    assert [phase for phase, _ in _lines(mesh, child["id"])] == ["succeeded"]


def test_p_ack_7_r3_a_copy_of_a_finished_childs_last_hop_runs_no_handler_and_writes_no_line(
    mesh: Any, clock: list[datetime]
) -> None:
    """P-ACK-7 (R3): the task still runs, the child's last hop reached x-sink; a copy sent to its queue after the
    lease is acked without a handler call, and x-sink gets nothing."""
    _, after, child = _fan_out(mesh, clock, "t-late-kid")
    _finish_child(mesh, clock, after, child)
    _calls().clear()
    clock[0] = NOW + PAST_LEASE

    assert after.handle(child) == []
    assert _calls() == []
    assert after.drain("x-sink") == []
    assert [phase for phase, _ in _lines(mesh, child["id"])] == ["succeeded"]


def test_p_stat_10_r3_a_child_copy_of_an_ended_task_is_acked_without_a_handler_call(
    mesh: Any, clock: list[datetime]
) -> None:
    """P-STAT-10 (R3): the pre-flight reads the parent's task item; once the task ended, any copy of its children is
    acked unprocessed, even one whose own fence never moved on (its first hop ran, then the task ended)."""
    split, after, child = _fan_out(mesh, clock, "t-ended-kid")
    assert after.handle(child) == []
    after.drain("x-sink")
    assert split.store.report_final("t-ended-kid", status="succeeded", result={"ok": True}, writer_id="m-1")
    _calls().clear()
    clock[0] = NOW + PAST_LEASE

    assert after.handle(child) == []
    assert _calls() == []
    assert after.drain("x-sink") == []


def test_p_ack_7_r3_an_in_flight_child_copy_after_its_hop_completed_is_acked(mesh: Any, clock: list[datetime]) -> None:
    """P-ACK-7 (R3): a copy that came in while the child's claim was live is put back; when it comes back after the
    lease, x-sink has marked the child done, so it is acked, not run again."""
    _, after, child = _fan_out(mesh, clock, "t-inflight-kid")
    assert after.handle(child) == []
    assert after.handle(child) == [0]  # the in-flight copy: held off by the live lease
    [done] = after.drain("x-sink")
    assert run_sink(mesh, [done], clock=lambda: clock[0])["batchItemFailures"] == []
    _calls().clear()
    clock[0] = NOW + PAST_LEASE

    assert after.handle(child) == []  # the copy comes back after the lease: acked
    assert _calls() == []
    assert after.drain("x-sink") == []


def test_p_ack_7_r3_a_fan_in_slice_copy_after_the_emission_runs_no_handler(mesh: Any) -> None:
    """P-ACK-7 (R3): a slice's hop completed when the slice reached the aggregator; a copy of that hop sent to its
    queue after the merge was emitted is acked, and no slice reaches the aggregator again."""
    flow = Flow(mesh, Clock())
    _, failed = flow.chunk.run(flow.start("t-late-slice", {"n": 2}))
    assert failed == []
    children = flow.chunk.drain("summarize-chunk")
    _, failed = flow.work.run(*children)
    assert failed == []
    slices = flow.chunk.drain(AGG)
    assert flow.aggregate(slices) == []
    assert len(flow.chunk.drain("digest")) == 1  # emitted
    flow.clock.now = NOW + PAST_LEASE

    _, failed = flow.work.run(children[0])
    assert failed == []
    # the handler did not run: no slice for the aggregator, no error for x-sump, nothing for x-sink
    assert flow.chunk.drain(AGG) == [] and flow.chunk.drain("x-sump") == [] and flow.chunk.drain("x-sink") == []


def test_p_ack_7_r3_a_finished_child_is_never_failed_later_by_a_copy_past_the_deadline(
    mesh: Any, clock: list[datetime]
) -> None:
    """Defect 5: a copy of a finished child arriving after the deadline is acked, not failed with ``SLA deadline
    expired``: the child keeps its one succeeded line and gets no failed/ line (P-CKPT-1)."""
    _, after, child = _fan_out(mesh, clock, "t-sla-kid")
    _finish_child(mesh, clock, after, child)
    clock[0] = NOW + timedelta(minutes=10)  # past the deadline (5 min) and the lease

    assert after.handle(child) == []
    for late in after.drain("x-sink"):  # before the fix: the SLA envelope, failed
        assert run_sink(mesh, [late], clock=lambda: clock[0])["batchItemFailures"] == []
    assert [phase for phase, _ in _lines(mesh, child["id"])] == ["succeeded"]


def test_p_ack_7_r3_x_sink_writes_no_failed_line_for_a_child_it_already_finished(
    mesh: Any, clock: list[datetime]
) -> None:
    """Defect 5, at x-sink itself: a failed envelope of a child whose succeeded line is written (a copy that passed
    the pre-flight before x-sink marked the child) is acked without a second line."""
    _, after, child = _fan_out(mesh, clock, "t-sink-kid")
    assert after.handle(child) == []
    [done] = after.drain("x-sink")
    failed = json.loads(json.dumps(done))
    failed["status"] = {**done["status"], "phase": "failed", "error": {"message": "SLA deadline expired"}}
    assert run_sink(mesh, [done], clock=lambda: clock[0])["batchItemFailures"] == []
    assert run_sink(mesh, [failed], clock=lambda: clock[0])["batchItemFailures"] == []
    assert [phase for phase, _ in _lines(mesh, child["id"])] == ["succeeded"]
    assert mesh.aws.sqs.receive_message(QueueUrl=mesh.resources.queue_urls["x-sump"]).get("Messages") is None


def test_p_stat_10_r3_a_child_copy_of_an_ended_task_runs_no_handler_when_the_pre_flight_read_fails(
    mesh: Any, clock: list[datetime]
) -> None:
    """P-STAT-10: a child's claim is on its own item and does not read the task, so only the pre-flight knows the task
    ended. When that read fails (throttled), the copy of a claimed child hop must not be claimed and run again after
    its lease: the record fails and SQS brings it back to a pre-flight that reads (the chaos run's re-run of a child
    hop 3.9 s after its task ended)."""
    split, after, child = _fan_out(mesh, clock, "t-throttled-kid")
    short = Context()
    short.remaining_ms = 15_000  # the chaos mesh's Lambda: a 25 s lease, well inside the task's deadline
    first = after.event(child)
    assert after.runtime.handle(first, short)["batchItemFailures"] == []
    after.sqs.delete_message(QueueUrl=after.url(after.actor), ReceiptHandle=first["Records"][0]["receiptHandle"])
    after.drain("x-sink")  # x-sink has not taken the child yet: it is not marked finished
    assert split.store.report_final("t-throttled-kid", status="succeeded", result={"ok": True}, writer_id="m-1")
    _calls().clear()
    clock[0] = NOW + timedelta(seconds=30)  # the copy comes back after the lease, as a crashed record does

    failed = _with_preflight_throttled(mesh, lambda: after.handle(child))
    assert _calls() == []
    assert after.drain("x-sink") == []
    assert failed == [0]  # SQS redelivers it

    assert after.handle(child) == []  # the redelivery's pre-flight reads: a copy, acked
    assert _calls() == []
    assert after.drain("x-sink") == []


def test_p_stat_10_a_root_envelope_goes_on_to_its_claim_when_the_pre_flight_read_fails(
    mesh: Any, clock: list[datetime]
) -> None:
    """A root's claim reads its own task item's status in its condition: a failed pre-flight read does not hold it."""
    split = Harness(mesh, "fan_out", clock)
    split.store.create_task(task_id="t-throttled-root", actor="normalize", payload={"text": "x"})

    assert _with_preflight_throttled(mesh, lambda: split.handle(envelope("t-throttled-root"))) == []
    assert len(_calls()) == 1
    assert any(m["id"] == "t-throttled-root" for m in split.drain("analyze"))


def _with_preflight_throttled(mesh: Any, act: Callable[[], list[int]]) -> list[int]:
    """``act()`` with every ``BatchGetItem`` of the mesh's DynamoDB client throttled; asserts one was."""
    throttled: list[str] = []

    def throttle(**_: Any) -> None:
        throttled.append("BatchGetItem")
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"}}, "BatchGetItem"
        )

    events = mesh.aws.dynamodb.meta.events
    events.register("provide-client-params.dynamodb.BatchGetItem", throttle, unique_id="throttle-preflight")
    try:
        out = act()
    finally:
        events.unregister("provide-client-params.dynamodb.BatchGetItem", unique_id="throttle-preflight")
    assert throttled, "the pre-flight read was never throttled: the test did not play its fault"
    return out
