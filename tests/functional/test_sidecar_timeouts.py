"""Deadlines and per-call time limits through ``ActorRuntime.handle`` against moto (PROTOCOL section 9, P-PROC-2 steps
2, 7, 12, 13, P-ERR-6, P-ERR-7, P-ACK-3).

Handlers come from ``handlers/timeout_handlers.py``. Interrupted calls use real limits of about 1 s (the test runs on
the main thread, so the layer interrupts through SIGALRM); nothing asserts how long anything took. The Lambda's
remaining time comes from fake contexts the tests control.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from asya_local.lambda_event import sqs_event
from tests.functional.actors import NOW, REGION, Context, Harness, TaskWrites, envelope, queue_arn, run_sink

pytestmark = pytest.mark.functional


def handlers_module() -> ModuleType:
    """``timeout_handlers`` as the runtime loaded it (its directory is on sys.path once a runtime was built)."""
    return sys.modules["timeout_handlers"]


@pytest.fixture
def make(mesh: Any) -> Iterator[Callable[..., Harness]]:
    """``make(handler, timeout="1", clock=...)``: a harness running ``timeout_handlers.<handler>``. Teardown closes
    the handlers' event loops and clears the module's records."""
    made: list[Harness] = []

    def build(handler: str, *, timeout: str = "1", clock: Callable[[], datetime] = lambda: NOW) -> Harness:
        h = Harness(mesh, handler, module="timeout_handlers", clock=clock, env={"ASYA_ACTOR_TIMEOUT": timeout})
        made.append(h)
        handlers_module().EVENTS.clear()
        handlers_module().SPENT.clear()
        return h

    yield build
    for h in made:
        if h.runtime._handler is not None:  # no public hook: a Lambda container never closes its handler
            h.runtime._handler.close()
    if made:
        handlers_module().EVENTS.clear()
        handlers_module().SPENT.clear()


def assert_timed_out(h: Harness, env: dict[str, Any], message: str, failed: list[str]) -> dict[str, Any]:
    """P-ERR-7 + P-ERR-4..6: acked, the input on x-sump with reason HandlerTimeout, the task failed at once."""
    assert failed == [], "HandlerTimeout is acked, never redelivered"
    [sump] = h.drain("x-sump")
    assert sump["id"] == env["id"]
    assert sump["route"] == env["route"]
    assert sump["status"]["phase"] == "failed"
    assert sump["status"]["reason"] == "HandlerTimeout"
    assert sump["status"]["actor"] == "normalize"
    assert sump["status"]["deadline_at"] == env["status"]["deadline_at"]
    assert sump["status"]["error"] == {"message": message, "type": "HandlerTimeout"}
    assert sump["payload"]["error"] == f"HandlerTimeout: {message}"
    assert sump["payload"]["original_payload"] == env["payload"]
    assert h.drain("x-sink") == [], "a timeout is not a handler error: no policy, no x-sink"
    task = h.store.get_task(env["id"], enforce_deadline=False)
    assert task is not None
    assert task["status"] == "failed"
    assert task["error"] == message
    return dict(sump)


# -- P-TIME-3: the SLA check before the call (step 7) and the last guard (step 12) ---------------------------------


def test_p_time_3_step_7_expired_deadline_never_calls_the_handler(make: Callable[..., Harness]) -> None:
    h = make("sleepy")
    h.store.create_task(task_id="t-sla7", actor="normalize", payload={})
    detailed = {"x-asya-flow": "text-pipeline", "x-asya-progress": "detailed"}  # `received` is written at step 9
    with TaskWrites(h.mesh.aws.dynamodb, "t-sla7") as writes:
        _, failed = h.run(envelope("t-sla7", headers=detailed, deadline=NOW + timedelta(milliseconds=999)))
    assert failed == []
    [out] = h.drain("x-sink")
    assert out["status"]["reason"] == "Timeout"
    assert out["status"]["error"] == {"message": "SLA deadline expired", "type": "DeadlineExceeded"}
    assert h.drain("x-sump") == [], "the sleeping handler was not called, so it cannot have timed out"
    # caught at step 7, before step 9: no `received` write, unlike the step-12 guard below, and (R2) no final status
    # either: x-sink writes it
    assert writes.requests == []
    assert run_sink(h.mesh, [out], clock=lambda: NOW) == {"batchItemFailures": []}
    task = h.store.get_task("t-sla7", enforce_deadline=False)
    assert task is not None
    assert (task["status"], task["error"], task["last_event_id"]) == ("failed", "SLA deadline expired", 2)


@dataclass
class SteppingClock:
    """Wall clock of the runtime and the store; a test moves it."""

    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


def test_p_time_3_step_12_last_guard_after_received(mesh: Any) -> None:
    """Exactly 1 s left at step 7 passes; the clock then moves 0.5 s while ``received`` is written (step 9), so the
    last guard (step 12) finds 0.5 s left: x-sink Timeout, no ``processing``, the handler is not called."""
    clock = SteppingClock()
    h = Harness(mesh, "echo", clock=clock)
    h.store.create_task(task_id="t-sla12", actor="normalize", payload={})

    def advance(params: Any, **_: Any) -> None:
        if "received" in json.dumps(params, default=str):  # the write of the received event (step 9)
            clock.now = NOW + timedelta(milliseconds=500)

    h.mesh.aws.dynamodb.meta.events.register("before-call.dynamodb", advance)
    env = envelope("t-sla12", deadline=NOW + timedelta(seconds=1), headers={"x-asya-progress": "detailed"})
    with TaskWrites(h.mesh.aws.dynamodb, "t-sla12") as writes:
        _, failed = h.run(env)
    assert clock.now > NOW, "the received event was written"
    assert failed == []
    assert h.drain("analyze") == [], "echo would have sent a frame"
    [out] = h.drain("x-sink")
    assert out["route"] == env["route"]
    assert out["payload"] == env["payload"]
    assert out["status"]["phase"] == "failed"
    assert out["status"]["reason"] == "Timeout"
    assert out["status"]["error"] == {"message": "SLA deadline expired", "type": "DeadlineExceeded"}
    assert out["status"]["updated_at"] == "2026-03-01T10:00:00Z"
    # `received` was written; no claim (`processing`) and, R2, no final status: x-sink writes it
    assert writes.steps() == [("running", "received")]
    assert run_sink(h.mesh, [out], clock=clock) == {"batchItemFailures": []}
    task = h.store.get_task("t-sla12", enforce_deadline=False)
    assert task is not None
    assert (task["status"], task["error"], task["last_event_id"]) == ("failed", "SLA deadline expired", 3)


# -- P-TIME-7, P-ERR-7: interrupting the handler at T -----------------------------------------------------------------


def test_p_time_7_sync_function_is_interrupted_at_the_actor_timeout(make: Callable[..., Harness]) -> None:
    h = make("sleepy")
    h.store.create_task(task_id="t-sleepy", actor="normalize", payload={})
    env = envelope("t-sleepy")
    _, failed = h.run(env)
    message = "handler exceeded its 1 s limit (actor timeout)"
    sump = assert_timed_out(h, env, message, failed)
    details = sump["payload"]["details"]
    assert (details["limit"], details["limit_seconds"]) == ("actor timeout", 1.0)
    assert "in _sleep_long" in details["traceback"], "the traceback shows where the handler was stuck"
    assert "HandlerInterruptError" in details["traceback"]
    assert "swallowed" not in handlers_module().EVENTS, "except Exception in the handler must not catch it"
    assert h.drain("analyze") == []


def test_p_time_7_class_method_is_interrupted(make: Callable[..., Harness]) -> None:
    h = make("Sleeper.process")
    h.store.create_task(task_id="t-method", actor="normalize", payload={})
    env = envelope("t-method")
    _, failed = h.run(env)
    assert_timed_out(h, env, "handler exceeded its 1 s limit (actor timeout)", failed)


def test_p_time_7_async_handler_is_cancelled(make: Callable[..., Harness]) -> None:
    h = make("async_sleepy")
    h.store.create_task(task_id="t-async", actor="normalize", payload={})
    env = envelope("t-async")
    _, failed = h.run(env)
    sump = assert_timed_out(h, env, "handler exceeded its 1 s limit (actor timeout)", failed)
    assert "CancelledError" in sump["payload"]["details"]["traceback"]


def assert_partial_timeout(h: Harness, env: dict[str, Any], message: str, failed: list[str]) -> dict[str, Any]:
    """P-ERR-7 (R2) after a frame: P-RES-10 in full. Acked; x-sump gets the ``PartialFailure`` notice with
    ``frames_sent`` and the timeout as the error; no x-sink and no final status (the task follows frame 0)."""
    assert failed == [], "HandlerTimeout is acked, never redelivered"
    [sump] = h.drain("x-sump")
    assert sump["id"] == env["id"]
    assert (sump["status"]["phase"], sump["status"]["reason"]) == ("failed", "PartialFailure")
    error = sump["status"]["error"]
    assert (error["message"], error["type"], error["frames_sent"]) == (message, "PartialFailure", 1)
    assert sump["payload"]["details"]["error_type"] == "HandlerTimeout"  # the error that ended the call
    assert sump["payload"]["original_payload"] == env["payload"]
    assert h.drain("x-sink") == []
    task = h.store.get_task(env["id"], enforce_deadline=False)
    assert task is not None
    assert (task["status"], task["step"]) == ("running", "processing"), "the claim, and no final status"
    return dict(sump)


def test_p_time_7_generator_frame_stays_sent_and_the_generator_is_closed(make: Callable[..., Harness]) -> None:
    h = make("one_then_sleep")
    h.store.create_task(task_id="t-gen", actor="normalize", payload={})
    env = envelope("t-gen")
    _, failed = h.run(env)
    assert_partial_timeout(h, env, "handler exceeded its 1 s limit (actor timeout)", failed)
    [frame] = h.drain("analyze")
    assert frame["id"] == "t-gen"
    assert frame["payload"] == {**env["payload"], "frame": 0}
    assert handlers_module().EVENTS == ["sleeping", "closed"]


def test_p_time_7_async_generator_frame_stays_sent_and_it_is_closed(make: Callable[..., Harness]) -> None:
    h = make("async_one_then_sleep")
    h.store.create_task(task_id="t-agen", actor="normalize", payload={})
    env = envelope("t-agen")
    _, failed = h.run(env)
    assert_partial_timeout(h, env, "handler exceeded its 1 s limit (actor timeout)", failed)
    assert [f["payload"]["frame"] for f in h.drain("analyze")] == [0]
    assert handlers_module().EVENTS == ["closed"]


# -- P-TIME-5: the effective limit is the smallest bound, named in the message ---------------------------------------


def test_p_time_5_task_deadline_bounds_the_call(make: Callable[..., Harness]) -> None:
    h = make("sleepy", timeout="30")
    h.store.create_task(task_id="t-dl", actor="normalize", payload={})
    env = envelope("t-dl", deadline=NOW + timedelta(seconds=1))
    _, failed = h.run(env)
    sump = assert_timed_out(h, env, "handler exceeded its 1 s limit (task deadline)", failed)
    assert sump["payload"]["details"]["limit"] == "task deadline"


def test_p_time_5_lambda_time_bounds_the_call(make: Callable[..., Harness]) -> None:
    """The first record always starts (P-TIME-6); its limit is then 6.5 s - 5 s safety margin = 1.5 s."""
    h = make("sleepy", timeout="30")
    h.store.create_task(task_id="t-lt", actor="normalize", payload={})
    env = envelope("t-lt")
    response = h.runtime.handle(h.event(env), Context(remaining_ms=6_500))
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    assert_timed_out(h, env, "handler exceeded its 1.5 s limit (Lambda time)", failed)


def test_p_time_5_a_handler_within_its_limit_is_untouched(make: Callable[..., Harness]) -> None:
    h = make("costly")
    _, failed = h.run(envelope("t-fast", payload={"cost": 0}))
    assert failed == []
    assert [o["payload"]["done"] for o in h.drain("analyze")] == [True]
    assert h.drain("x-sump") == []


def test_p_time_4_a_hook_copy_past_the_deadline_gets_the_actor_timeout(make: Callable[..., Harness]) -> None:
    """Hook copies skip the SLA check (P-TIME-4), so the task deadline does not bound their call either (chosen):
    a deadline 10 s in the past would otherwise make T = 0."""
    h = make("nap", timeout="30")
    env = envelope("t-hook", deadline=NOW - timedelta(seconds=10), headers={"x-asya-sink-hook": "normalize"})
    _, failed = h.run(env)
    assert failed == []
    assert h.drain("x-sump") == []
    [out] = h.drain("analyze")
    assert out["payload"]["napped"] is True


# -- P-TIME-6, P-ACK-3: unstarted records come back and complete -----------------------------------------------------


@dataclass
class SimulatedContext:
    """A Lambda context whose remaining time shrinks by the simulated seconds ``costly`` handlers spend."""

    budget_ms: int
    spent: list[float]

    def get_remaining_time_in_millis(self) -> int:
        return int(self.budget_ms - sum(self.spent) * 1000)


def _receive_event(h: Harness, count: int) -> dict[str, Any]:
    """Receive ``count`` messages already on the actor's queue as one Lambda SQS event (a redelivery)."""
    url = h.url(h.actor)
    messages: list[dict[str, Any]] = []
    for _ in range(20):
        got = h.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
        messages.extend(got.get("Messages", []))
        if len(messages) >= count:
            break
    return sqs_event(messages, queue_arn=queue_arn(h.mesh, h.actor), region=REGION)


def _ids(event: dict[str, Any], response: dict[str, Any]) -> list[str]:
    by_message = {r["messageId"]: json.loads(r["body"])["id"] for r in event["Records"]}
    return [by_message[f["itemIdentifier"]] for f in response["batchItemFailures"]]


def test_p_time_6_slow_batch_leaves_unstarted_records_that_complete_when_delivered_again(
    make: Callable[..., Harness],
) -> None:
    """10 records of 20 simulated seconds each, 100 s of Lambda time, actor timeout 30 s: a record starts only while
    remaining - 5 s >= 30 s, so records 0-3 run and 4-9 fail unstarted, visible again at once (P-TIME-6); delivered
    again with a fresh invocation they all complete. Nothing is lost or run twice."""
    h = make("costly", timeout="30")
    spent = handlers_module().SPENT
    visibility: list[int] = []
    h.sqs.meta.events.register(
        "before-parameter-build.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: visibility.extend(e["VisibilityTimeout"] for e in params["Entries"]),
    )
    bodies = [envelope(f"t-{i}", payload={"cost": 20, "i": i}) for i in range(10)]
    event = h.event(*bodies)
    response = h.runtime.handle(event, SimulatedContext(budget_ms=100_000, spent=spent))
    assert _ids(event, response) == [f"t-{i}" for i in range(4, 10)]
    assert sorted(o["id"] for o in h.drain("analyze")) == [f"t-{i}" for i in range(4)]
    assert visibility == [0] * 6, "unstarted records come back at once"
    assert h.drain("x-sump") == []
    assert spent == [20.0] * 4, "unstarted records never reached the handler"

    spent.clear()
    again = _receive_event(h, 6)
    assert sorted(json.loads(r["body"])["id"] for r in again["Records"]) == [f"t-{i}" for i in range(4, 10)]
    response = h.runtime.handle(again, SimulatedContext(budget_ms=300_000, spent=spent))
    assert response == {"batchItemFailures": []}
    assert sorted(o["id"] for o in h.drain("analyze")) == [f"t-{i}" for i in range(4, 10)]
    assert h.sqs.receive_message(QueueUrl=h.url("normalize")).get("Messages", []) == []
