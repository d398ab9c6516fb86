"""The child tree (docs/protocol.md P-FAN-7..9 (R3)): a fan-out child's item carries its status, current actor,
attempt and last error on the writes that already happen (its claim, its retry's fence write, its finish at x-sink),
and the parent's task view lists them; a failed child's slice puts the failure on the child's actor."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from asya.hops import DEFAULT_MAX_HOPS, ceiling_message
from asya.infra import LOST_FRAME
from asya.store import records as rec
from tests.functional import actors
from tests.functional.actors import NOW, TaskWrites, run_sink
from tests.functional.test_retry import Harness, envelope, policy
from tests.functional.test_sump import Sump

pytestmark = pytest.mark.functional


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, resiliency: dict[str, Any] | None, **kwargs: Any) -> Harness:
        return Harness(mesh, handler, resiliency, **kwargs)

    return make


def _node(h: actors.Harness, parent: str, child: str) -> dict[str, Any]:
    view = h.store.get_task(parent)
    assert view is not None
    return next(c for c in view["children"] if c["id"] == child)


def test_p_fan_7_a_retrying_then_failing_child_shows_in_the_parents_tree_on_no_extra_write(
    harness: Callable[..., Harness],
) -> None:
    h = harness("fails_before_attempt", policy(max_attempts=2, initial_delay=0, jitter=False))
    h.store.create_task(task_id="t-tree", actor="normalize", payload={})
    child = {**envelope("c-tree", payload={"succeed_at": 9}), "parent_id": "t-tree"}
    key = rec.key("t-tree", rec.child_sk("c-tree"))

    with TaskWrites(h.mesh.aws.dynamodb, "t-tree") as writes:
        assert h.handle(child) == []  # attempt 1 fails: a retry
    # one claim and one retry fence write, both on the child item: the tree added no write (GW-DATA-8)
    assert [(op, req["Key"]) for op, req in writes.requests] == [("UpdateItem", key), ("UpdateItem", key)]
    node = _node(h, "t-tree", "c-tree")
    assert (node["status"], node["current_actor"], node["attempt"]) == ("retrying", "normalize", 2)
    assert node["error"] == "TimeoutError: attempt 1 timed out"  # as the retrying status of a task says it

    [retry] = h.drain("normalize")
    assert h.handle(retry) == []  # attempt 2 fails: exhausted, to x-sink
    assert _node(h, "t-tree", "c-tree")["status"] == "running"  # claimed by attempt 2, not finished yet
    [failed] = h.drain("x-sink")
    assert run_sink(h.mesh, [failed], clock=lambda: NOW)["batchItemFailures"] == []
    node = _node(h, "t-tree", "c-tree")
    assert (node["status"], node["current_actor"], node["attempt"]) == ("failed", "normalize", 2)
    assert node["error"] == "attempt 2 timed out"
    assert h.store.get_task("t-tree")["status"] == "pending"  # a child never changes its task (P-FAN-3)


def test_p_fan_7_a_succeeded_child_reads_succeeded(harness: Callable[..., Harness]) -> None:
    h = harness("fails_before_attempt", None)
    h.store.create_task(task_id="t-tree-ok", actor="normalize", payload={})
    child = {**envelope("c-ok", payload={"succeed_at": 1}), "parent_id": "t-tree-ok"}
    child["route"] = {"prev": ["intake"], "curr": "normalize", "next": []}
    assert h.handle(child) == []
    [done] = h.drain("x-sink")
    assert run_sink(h.mesh, [done], clock=lambda: NOW)["batchItemFailures"] == []
    node = _node(h, "t-tree-ok", "c-ok")
    assert (node["status"], node["current_actor"], node["attempt"], node["error"]) == (
        "succeeded",
        "normalize",
        1,
        None,
    )
    # P-FAN-9: the line reserved on the finish write is where x-sink wrote the child's envelope
    body = h.mesh.aws.s3.get_object(Bucket=h.mesh.resources.bucket, Key=node["checkpoint_key"])["Body"].read()
    line = json.loads(body.decode("utf-8").splitlines()[node["checkpoint_line"] - 1])
    assert (line["id"], line["parent_id"], line["status"]["phase"]) == ("c-ok", "t-tree-ok", "succeeded")


def test_p_fan_9_roots_and_children_of_one_batch_share_an_object_at_their_reserved_lines(
    harness: Callable[..., Harness],
) -> None:
    h = harness("fails_before_attempt", None)
    h.store.create_task(task_id="t-mix", actor="normalize", payload={})
    bodies = []
    for env_id, parent in (("t-mix", None), ("c-mix-1", "t-mix"), ("c-mix-2", "t-mix")):
        body = actors.envelope(env_id, parent_id=parent, nxt=[])
        body["status"].update(phase="succeeded", reason="Completed")
        bodies.append(body)
        if parent is not None:  # the child's claim at its last actor created its item
            assert h.store.claim_fence(env_id, parent, claim=(1, 1, 0), actor="normalize").outcome.value == "accepted"
    assert run_sink(h.mesh, [bodies[1], bodies[0], bodies[2]], clock=lambda: NOW)["batchItemFailures"] == []
    view = h.store.get_task("t-mix")
    assert view is not None
    nodes = {c["id"]: c for c in view["children"]}
    assert {view["checkpoint_key"], nodes["c-mix-1"]["checkpoint_key"], nodes["c-mix-2"]["checkpoint_key"]} == {
        view["checkpoint_key"]
    }
    assert (nodes["c-mix-1"]["checkpoint_line"], view["checkpoint_line"], nodes["c-mix-2"]["checkpoint_line"]) == (
        1,
        2,
        3,
    )


def test_p_fan_8_a_failed_childs_slice_puts_the_failure_on_the_childs_actor(mesh: Any) -> None:
    """Issue 28: a failed child made its parent read ``current_actor: split-items``; the parent now reads the actor
    the child failed at, and the error names the child."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    h.store.create_task(task_id="t-fan-fail", actor="normalize", payload={})
    assert h.store.running(
        "t-fan-fail", step="processing", actor="split-items", route_prev=[], route_curr="split-items", route_next=["x"]
    ).accepted
    slice_ = actors.envelope("c-slice", parent_id="t-fan-fail", payload={"error": "bad item"})
    slice_["headers"]["x-asya-fan-in"] = {"origin_id": "t-fan-fail", "index": 1, "count": 3}
    slice_["status"].update(phase="failed", reason="RuntimeError", actor="price-item")
    slice_["status"]["error"] = {"message": "bad item", "type": "ValueError"}
    assert run_sink(mesh, [slice_], clock=lambda: NOW)["batchItemFailures"] == []
    view = h.store.get_task("t-fan-fail")
    assert view is not None
    assert (view["status"], view["current_actor"], view["failed_actor"]) == ("failed", "price-item", "price-item")
    assert view["error"] == "child c-slice: bad item"


def _running_child(h: actors.Harness, parent: str, child: str) -> None:
    """The parent task, and its child claimed at ``intake`` (hop 0): its item reads ``running``."""
    h.store.create_task(task_id=parent, actor="intake", payload={})
    assert h.store.claim_fence(child, parent, claim=(0, 1, 0), actor="intake").outcome.value == "accepted"
    assert _node(h, parent, child)["status"] == "running"


def test_p_sump_7_a_child_failed_by_an_infrastructure_error_reads_failed_at_its_own_actor(mesh: Any) -> None:
    """Issue 28: a child failed by an infrastructure error (here the hop ceiling, P-HOP-1) never reaches x-sink, and
    its item read ``running`` until it expired. x-sump now finishes it: ``failed`` at the actor that sent it there,
    with the error and x-sump's checkpoint line, on one write of the child item; the parent is left alone (P-FAN-3)."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    _running_child(h, "t-infra", "c-infra")
    child = actors.envelope("c-infra", parent_id="t-infra", prev=["intake"], nxt=[])
    child["headers"]["x-asya-hops"] = DEFAULT_MAX_HOPS
    response, _ = h.run(child)
    assert response["batchItemFailures"] == []
    [sent] = h.drain("x-sump")
    assert (sent["status"]["reason"], sent["parent_id"]) == ("HopCeiling", "t-infra")

    with TaskWrites(mesh.aws.dynamodb, "t-infra") as writes:
        assert Sump(mesh).run(sent)[0] == []
    assert [(op, req["Key"]) for op, req in writes.requests] == [
        ("UpdateItem", rec.key("t-infra", rec.child_sk("c-infra")))
    ]
    node = _node(h, "t-infra", "c-infra")
    assert (node["status"], node["current_actor"], node["attempt"]) == ("failed", "normalize", 1)
    assert node["error"] == f"HopCeiling: {ceiling_message(DEFAULT_MAX_HOPS)}"
    # P-FAN-9: the line named on the finish write is where x-sump checkpointed the child's envelope
    body = mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=node["checkpoint_key"])["Body"].read()
    line = json.loads(body.decode("utf-8").splitlines()[node["checkpoint_line"] - 1])
    assert (line["id"], line["status"]["reason"]) == ("c-infra", "HopCeiling")
    assert h.store.get_task("t-infra")["status"] == "pending"  # type: ignore[index]


def test_p_sump_7_a_failed_fan_in_slice_x_sink_forwarded_finishes_its_child_at_x_sump(mesh: Any) -> None:
    """Issue 28: a child's failed fan-in slice failed its task at x-sink (P-FAN-8), which forwards it unchecked to
    x-sump; its item still read ``running``. x-sump, which writes its checkpoint, finishes it there."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    _running_child(h, "t-slice-fail", "c-slice-2")
    slice_ = actors.envelope("c-slice-2", parent_id="t-slice-fail", payload={"error": "bad item"})
    slice_["headers"]["x-asya-fan-in"] = {"origin_id": "t-slice-fail", "index": 1, "count": 2}
    slice_["status"].update(phase="failed", reason="RuntimeError", actor="price-item")
    slice_["status"]["error"] = {"message": "bad item", "type": "ValueError"}
    assert run_sink(mesh, [slice_], clock=lambda: NOW)["batchItemFailures"] == []
    assert h.store.get_task("t-slice-fail")["status"] == "failed"  # type: ignore[index]
    [forwarded] = h.drain("x-sump")

    assert Sump(mesh).run(forwarded)[0] == []
    node = _node(h, "t-slice-fail", "c-slice-2")
    assert (node["status"], node["current_actor"], node["error"]) == ("failed", "price-item", "ValueError: bad item")
    assert node["checkpoint_key"] is not None


@pytest.mark.parametrize(
    ("reason", "extra"),
    [
        ("PartialFailure", {"frames_sent": 1}),  # P-RES-10: the frames went on
        ("SerializationError", {"frames_sent": 2}),  # the notice of an oversized frame after others left
        ("UnknownActor", {LOST_FRAME: "c-grandchild"}),  # P-ROUTE-8: a frame of the child's, not its lineage
    ],
)
def test_p_sump_7_a_notice_or_a_lost_frame_of_a_child_leaves_the_child_running(
    mesh: Any, reason: str, extra: dict[str, Any]
) -> None:
    """Its lineage goes on: finishing it here would make its own end at x-sink a late copy (P-ACK-7)."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    parent, child = f"t-notice-{reason}", f"c-notice-{reason}"
    _running_child(h, parent, child)
    notice = actors.envelope(child, parent_id=parent, prev=["intake"], nxt=["analyze"])
    notice["status"].update(phase="failed", reason=reason)
    notice["status"]["error"] = {"message": "it broke", "type": reason, **extra}

    assert Sump(mesh).run(notice)[0] == []
    assert _node(h, parent, child)["status"] == "running"


def test_p_sump_8_a_fan_in_slice_failed_by_an_infrastructure_error_fails_its_parent_at_once(mesh: Any) -> None:
    """A child's fan-in slice failed by an infrastructure error (here the hop ceiling) reached x-sump only, which
    finished the child (P-SUMP-7) but left its parent ``running`` until the deadline, although a handler error of the
    same slice fails it at once through x-sink. x-sump now fails the fan-in's origin with x-sink's write: the failure
    is the child's (P-FAN-8). A second delivery, and another child's failure after it, leave the failed task as it
    is (P-SUMP-8 (R3))."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    _running_child(h, "t-fan-infra", "c-fan-infra")
    assert h.store.running(
        "t-fan-infra", step="processing", actor="split-items", route_prev=[], route_curr="split-items", route_next=[]
    ).accepted
    child = actors.envelope("c-fan-infra", parent_id="t-fan-infra", prev=["intake"], nxt=["merge"])
    child["headers"]["x-asya-fan-in"] = {"origin_id": "t-fan-infra", "index": 1, "count": 2}
    child["headers"]["x-asya-hops"] = DEFAULT_MAX_HOPS
    response, _ = h.run(child)
    assert response["batchItemFailures"] == []
    [sent] = h.drain("x-sump")
    assert (sent["status"]["reason"], sent["headers"]["x-asya-fan-in"]["origin_id"]) == ("HopCeiling", "t-fan-infra")

    assert Sump(mesh).run(sent)[0] == []
    view = h.store.get_task("t-fan-infra")
    assert view is not None
    assert (view["status"], view["current_actor"], view["failed_actor"]) == ("failed", "normalize", "normalize")
    assert view["error"] == f"child c-fan-infra: {ceiling_message(DEFAULT_MAX_HOPS)}"
    assert _node(h, "t-fan-infra", "c-fan-infra")["status"] == "failed"
    task_key = rec.key("t-fan-infra", rec.TASK_SK)
    before = mesh.aws.dynamodb.get_item(TableName=mesh.resources.table, Key=task_key)["Item"]

    other = json.loads(json.dumps(sent))
    other["id"] = "c-fan-infra-2"
    other["status"].update(actor="price-item")
    other["status"]["error"] = {"message": "payload gone", "type": "PayloadUnavailable"}
    other["status"]["reason"] = "PayloadUnavailable"
    assert Sump(mesh).run(sent, other)[0] == []
    after = mesh.aws.dynamodb.get_item(TableName=mesh.resources.table, Key=task_key)["Item"]
    assert after == before


@pytest.mark.parametrize("fan_in", [False, True], ids=["child", "fan-in-slice"])
def test_p_fan_7_a_child_stopped_by_its_tasks_cancel_reads_canceled(mesh: Any, fan_in: bool) -> None:
    """A child of a canceled task stops at its next pre-flight and reaches x-sink as ``canceled`` (P-FAN-5,
    P-STAT-10). x-sink acked it without touching its item, which read ``running`` for ever in the view and the
    console; its end at x-sink now finishes it ``canceled`` at the actor it stopped at, still with no checkpoint."""
    h = actors.Harness(mesh, "echo", clock=lambda: NOW)
    parent, child_id = f"t-cancel-{fan_in}", f"c-cancel-{fan_in}"
    _running_child(h, parent, child_id)
    assert h.store.cancel(parent) == "canceled"
    child = actors.envelope(child_id, parent_id=parent, prev=["intake"], nxt=["merge"])
    if fan_in:
        child["headers"]["x-asya-fan-in"] = {"origin_id": parent, "index": 1, "count": 2}
    response, _ = h.run(child)
    assert response["batchItemFailures"] == []
    [stopped] = h.drain("x-sink")
    assert (stopped["status"]["phase"], stopped["status"]["reason"]) == ("canceled", "PreFlightCanceled")

    assert run_sink(mesh, [stopped, stopped], clock=lambda: NOW)["batchItemFailures"] == []
    node = _node(h, parent, child_id)
    assert (node["status"], node["current_actor"], node["error"]) == ("canceled", stopped["status"]["actor"], None)
    assert "checkpoint_key" not in node or node["checkpoint_key"] is None
    assert h.store.get_task(parent)["status"] == "canceled"  # type: ignore[index]
