"""Retry policies in the actor runtime against moto (PROTOCOL 8.3, 8.4, step 3 of P-PROC-2, P-PROC-4, P-STAT-5,
P-ACK-2).

Records go through ``ActorRuntime.handle`` with a fixed clock and an injected random source; outcomes are read from
the queues (messages, and the ``DelaySeconds`` of the real ``SendMessage`` calls) and from the task store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from asya.store import ERROR_LIMIT_BYTES
from asya.timeutil import format_ts
from tests.functional import actors
from tests.functional.actors import NOW, TaskWrites

pytestmark = pytest.mark.functional

INPUT = {"text": "Hello World"}


class Harness(actors.Harness):
    """``normalize`` running a handler of ``retry_handlers`` with a retry policy, on a clock a test moves, plus the
    parameters of every ``SendMessage`` the runtime made."""

    def __init__(self, mesh: Any, handler: str, resiliency: dict[str, Any] | None, *, random: float = 0.5) -> None:
        self.now = NOW
        self.sends: list[dict[str, Any]] = []
        env = {} if resiliency is None else {"ASYA_RESILIENCY": json.dumps(resiliency)}
        super().__init__(mesh, handler, module="retry_handlers", clock=lambda: self.now, env=env, random=lambda: random)
        self.sqs.meta.events.register("before-parameter-build.sqs.SendMessage", self._record_send)

    def _record_send(self, params: dict[str, Any], **_: Any) -> None:
        self.sends.append(params)

    def sent_to(self, actor: str) -> list[tuple[int, dict[str, Any]]]:
        """``(DelaySeconds, body)`` of every SendMessage the runtime made to ``actor``'s queue."""
        return [
            (p.get("DelaySeconds", 0), json.loads(p["MessageBody"]))
            for p in self.sends
            if p["QueueUrl"] == self.url(actor)
        ]

    def handle(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Deliver ``body`` as one SQS record and delete it when acked (as the ESM does); returns
        ``batchItemFailures``."""
        event = self.event(body)
        self.sends.clear()
        failures: list[dict[str, Any]] = self.runtime.handle(event, actors.Context())["batchItemFailures"]
        if not failures:
            [record] = event["Records"]
            self.sqs.delete_message(QueueUrl=self.url(self.actor), ReceiptHandle=record["receiptHandle"])
        return failures

    def delayed(self, actor: str) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.url(actor), AttributeNames=["All"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessagesDelayed"])

    def writes(self, task_id: str) -> TaskWrites:
        """The writes of ``task_id``'s partition while the returned context is open (spec revision 2: the task item
        each accepted write left, since status changes are stored as no item)."""
        return TaskWrites(self.mesh.aws.dynamodb, task_id)


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, resiliency: dict[str, Any] | None, **kwargs: Any) -> Harness:
        return Harness(mesh, handler, resiliency, **kwargs)

    return make


def envelope(
    task_id: str,
    *,
    headers: dict[str, Any] | None = None,
    deadline: timedelta = timedelta(minutes=5),
    payload: Any = None,
) -> dict[str, Any]:
    return actors.envelope(
        task_id,
        prev=["intake"],
        headers={"x-asya-flow": "text-pipeline", **(headers or {})},
        deadline=NOW + deadline,
        payload=dict(INPUT) if payload is None else payload,
    )


def policy(**fields: Any) -> dict[str, Any]:
    return {"policies": {"default": fields}}


# -- retry (P-RES-8) --------------------------------------------------------------------------------------------------


def test_p_res_8_retry_envelope_goes_to_the_own_queue(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=3, initial_delay=0, jitter=False))
    env = envelope("t-retry", headers={"traceparent": "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-1a2b3c4d5e6f7081-01"})
    assert h.handle(env) == []
    assert h.drain("x-sink") == []
    assert h.drain("analyze") == []
    [retry] = h.drain("normalize")
    assert retry["id"] == "t-retry"
    assert "parent_id" not in retry
    assert retry["route"] == env["route"], "retry: route not shifted"
    assert retry["payload"] == INPUT, "the input as received, not the handler's in-place mutation"
    assert retry["headers"]["x-asya-first-attempt"] == format_ts(NOW)
    assert retry["headers"]["x-asya-flow"] == "text-pipeline"
    assert retry["headers"]["traceparent"] == env["headers"]["traceparent"]
    assert "x-asya-delay-until" not in retry["headers"]
    status = retry["status"]
    assert {k: status[k] for k in ("phase", "actor", "attempt", "max_attempts")} == {
        "phase": "retrying",
        "actor": "normalize",
        "attempt": 2,
        "max_attempts": 3,
    }
    assert "reason" not in status
    assert status["created_at"] == env["status"]["created_at"]
    assert status["deadline_at"] == env["status"]["deadline_at"]
    assert status["updated_at"] == format_ts(NOW)
    assert status["error"]["type"] == "ValueError"
    assert status["error"]["message"] == "model returned no text"
    assert "Traceback" in status["error"]["traceback"]


def test_p_res_6_retry_is_sent_with_the_policy_delay(harness: Callable[..., Harness]) -> None:
    # exponential, attempt 1: 4 s, capped at 3 s, jitter U = 0.5 + 0.9 -> 4.2 s -> DelaySeconds 5
    h = harness("mutate_then_fail", policy(initial_delay=4, max_interval=3), random=0.9)
    assert h.handle(envelope("t-delay")) == []
    [(delay, body)] = h.sent_to("normalize")
    assert delay == 5
    assert body["status"]["phase"] == "retrying"
    assert h.delayed("normalize") == 1, "the message waits on the own queue"
    assert h.drain("x-sink") == []


def test_p_res_3_rule_selected_by_the_error_mro(harness: Callable[..., Harness]) -> None:
    resiliency = {
        "policies": {"default": {"max_attempts": 1}, "network": {"max_attempts": 5, "initial_delay": 0}},
        "rules": [{"errors": ["OSError"], "policy": "network"}],
    }
    h = harness("rate_limited", resiliency)
    assert h.handle(envelope("t-mro")) == []
    [retry] = h.drain("normalize")
    assert retry["status"]["max_attempts"] == 5
    assert retry["status"]["error"]["type"] == "retry_handlers.RateLimitedError"
    assert retry["status"]["error"]["mro"][:2] == ["ConnectionError", "OSError"]


def test_p_proc_4_retry_keeps_attempt_and_first_attempt_until_success(harness: Callable[..., Harness]) -> None:
    h = harness("fails_before_attempt", policy(max_attempts=5, initial_delay=0, jitter=False))
    h.handle(envelope("t-cycle", payload={"succeed_at": 3}))
    [second] = h.drain("normalize")
    assert second["status"]["attempt"] == 2
    h.now = NOW + timedelta(seconds=7)
    h.handle(second)
    [third] = h.drain("normalize")
    assert third["status"]["attempt"] == 3
    assert third["status"]["max_attempts"] == 5
    assert third["headers"]["x-asya-first-attempt"] == format_ts(NOW), "kept across retries of the same actor"
    assert third["status"]["error"]["message"] == "attempt 2 timed out"
    h.now = NOW + timedelta(seconds=9)
    assert h.handle(third) == []
    [out] = h.drain("analyze")
    assert out["payload"] == {"succeed_at": 3, "succeeded_on": 3}
    assert out["status"]["phase"] == "pending"
    assert out["status"]["attempt"] == 1, "a new actor starts at attempt 1"
    assert out["route"] == {"prev": ["intake", "normalize"], "curr": "analyze", "next": []}
    assert h.drain("x-sink") == []


def test_p_stat_5_retrying_event_for_a_tracked_task(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=3, initial_delay=2, backoff="constant", jitter=False))
    """P-STAT-5 with P-RES-8 (R2): the claim, then ONE write of the ``retrying`` status and the fence ``(h, n + 1)``
    with ``lease_until = 0``, conditional on the stored fence being ``(h, n)``."""
    h.store.create_task(task_id="t-track", actor="normalize", payload=INPUT)
    with h.writes("t-track") as writes:
        assert h.handle(envelope("t-track")) == []
    assert writes.steps() == [("running", "processing"), ("running", "retrying")]
    assert writes.operations() == ["UpdateItem", "UpdateItem"]
    claim, retrying = writes.states
    assert (claim["fence_h"], claim["fence_a"]) == (2, 1)  # prev = ["intake"]: h = 2
    assert (retrying["fence_h"], retrying["fence_a"], retrying["lease_until"]) == (2, 2, 0)
    _, retry_request = writes.requests[1]
    assert (retry_request["ExpressionAttributeValues"][":rh"], retry_request["ExpressionAttributeValues"][":ra"]) == (
        {"N": "2"},
        {"N": "1"},
    )
    assert retrying["data"]["attempt"] == 2
    assert retrying["data"]["delay_seconds"] == 2
    assert retrying["data"]["error"] == "ValueError: model returned no text"
    task = h.store.get_task("t-track")
    assert task is not None
    assert (task["status"], task["step"], task["current_actor"]) == ("running", "retrying", "normalize")
    assert task["last_event_id"] == 3


def test_p_stat_5_a_long_route_and_a_long_retry_error_are_fitted_not_lost(harness: Callable[..., Harness]) -> None:
    """GW-DATA-8: the layer's running events stay within the store's limits however long the route (a looping agent
    grows ``prev`` without bound) or the error: the route lists are left out (``omitted``) and the error clipped,
    while progress still counts the whole route (P-STAT-8) and the retry envelope keeps the whole error."""
    h = harness("long_error", policy(max_attempts=3, initial_delay=2, backoff="constant", jitter=False))
    h.store.create_task(task_id="t-long", actor="normalize", payload=INPUT)
    prev = [f"agent-step-{i:04d}" for i in range(400)]
    # progress `detailed`: the claim stores the route lists (under `hops` it stores none)
    env = actors.envelope(
        "t-long",
        prev=prev,
        nxt=["analyze"],
        deadline=NOW + timedelta(minutes=5),
        headers={"x-asya-flow": "text-pipeline", "x-asya-progress": "detailed"},
    )
    env["payload"] = {"size": 50_000}
    with h.writes("t-long") as writes:
        assert h.handle(env) == []
    assert [step for _, step in writes.steps()] == ["received", "processing", "retrying"]
    _, claim, retrying = writes.states
    processing = claim["data"]
    assert (processing["omitted"], "prev" in processing) == (["prev"], False)
    assert processing["next"] == ["analyze"]
    assert claim["progress_percent"] == round((400 + 0.5) / 402 * 100, 1)
    assert retrying["data"]["error"].endswith("\u2026")  # cut with an ellipsis (GW-DATA-8, R2)
    assert len(retrying["data"]["error"].encode("utf-8")) <= ERROR_LIMIT_BYTES
    [(delay, again)] = h.sent_to("normalize")
    assert (delay, again["status"]["error"]["message"]) == (2, "e" * 50_000)


def test_p_stat_7_a_failing_retrying_write_still_schedules_the_retry(
    harness: Callable[..., Harness], mesh: Any
) -> None:
    """P-STAT-7, P-RES-8: the ``retrying`` write (status and fence) is refused by DynamoDB on all of its 3 tries; the
    retry is still sent and the record acked. The claim before it is durable (P-ACK-8) and lands."""
    h = harness("mutate_then_fail", policy(max_attempts=3, initial_delay=0, jitter=False))
    h.store.create_task(task_id="t-unwritten", actor="normalize", payload=INPUT)
    refused: list[str] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if ":rh" in params.get("ExpressionAttributeValues", {}):  # the retry's fence write
            refused.append(params["TableName"])
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "table unavailable"}}, "UpdateItem")

    mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", refuse)
    assert h.handle(envelope("t-unwritten")) == []
    assert len(refused) == 3, "the retrying write was tried 3 times"
    [retry] = h.drain("normalize")
    assert (retry["status"]["phase"], retry["status"]["attempt"]) == ("retrying", 2)
    assert h.drain("x-sink") == []
    task = h.store.get_task("t-unwritten")
    assert task is not None
    assert (task["status"], task["step"], task["last_event_id"]) == ("running", "processing", 2)


def test_p_stat_12_stealth_retry_writes_no_event(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(initial_delay=0))
    h.store.create_task(task_id="t-quiet", actor="normalize", payload=INPUT)
    with h.writes("t-quiet") as writes:
        assert h.handle(envelope("t-quiet", headers={"x-asya-mesh-status": "off"})) == []
    assert writes.requests == []  # no claim, no retrying status, no fence
    [retry] = h.drain("normalize")
    assert retry["status"]["phase"] == "retrying"


def test_p_ack_2_failed_retry_send_fails_the_record(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(initial_delay=0))

    def reject(params: dict[str, Any], **_: Any) -> None:
        if params["QueueUrl"] == h.url("normalize") and "retrying" in params["MessageBody"]:
            raise EndpointConnectionError(endpoint_url=params["QueueUrl"])

    h.sqs.meta.events.register("before-parameter-build.sqs.SendMessage", reject)
    failures = h.handle(envelope("t-nosend"))
    assert len(failures) == 1
    assert h.drain("x-sink") == []


# -- exhaustion (P-RES-7, P-RES-11..14) -------------------------------------------------------------------------------


def test_p_res_11_exhausted_policy_goes_to_sink_policy_exhausted(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=2, initial_delay=0))
    env = envelope("t-exh")
    h.handle(env)
    [retry] = h.drain("normalize")
    h.now = NOW + timedelta(seconds=3)
    assert h.handle(retry) == []
    assert h.drain("normalize") == []
    [out] = h.drain("x-sink")
    assert out["route"] == env["route"], "curr stays the failing actor"
    status = out["status"]
    assert {k: status[k] for k in ("phase", "reason", "actor", "attempt", "max_attempts")} == {
        "phase": "failed",
        "reason": "PolicyExhausted",
        "actor": "normalize",
        "attempt": 2,
        "max_attempts": 2,
    }
    assert status["updated_at"] == format_ts(NOW + timedelta(seconds=3))
    assert status["deadline_at"] == env["status"]["deadline_at"]
    assert status["created_at"] == env["status"]["created_at"]
    assert status["error"]["type"] == "ValueError"
    assert out["payload"]["error"] == "ValueError: model returned no text"
    assert out["payload"]["details"]["message"] == "model returned no text"
    assert out["payload"]["original_payload"] == INPUT
    assert out["headers"]["x-asya-first-attempt"] == format_ts(NOW)


def test_p_res_10_an_error_after_a_frame_is_a_partial_failure_never_retried(harness: Callable[..., Harness]) -> None:
    """R2: the frame yielded before the error is sent (frame 0, after the notice); nothing is retried although the
    policy would; x-sump gets a ``PartialFailure`` notice with ``frames_sent``; the task gets no final status (its
    outcome follows frame 0's lineage, P-ERR-6)."""
    h = harness("frame_then_fail", policy(max_attempts=3, initial_delay=0, jitter=False))
    h.store.create_task(task_id="t-rerun", actor="normalize", payload=INPUT)
    order: list[str] = []
    for operation in ("SendMessage", "SendMessageBatch"):
        h.sqs.meta.events.register(
            f"before-parameter-build.sqs.{operation}", lambda params, **_: order.append(params["QueueUrl"])
        )
    assert h.handle(envelope("t-rerun")) == []
    sent = [url for url in order if url != h.url("normalize")]  # not the test's own delivery of the input
    assert sent == [h.url("x-sump"), h.url("analyze")], "the notice first, frame 0 last"
    [first] = h.drain("analyze")
    assert first["id"] == "t-rerun"
    assert first["payload"] == {**INPUT, "sent_on": 1}
    assert first["route"] == {"prev": ["intake", "normalize"], "curr": "analyze", "next": []}
    assert h.drain("normalize") == [], "no retry"
    assert h.drain("x-sink") == []
    [notice] = h.drain("x-sump")
    assert notice["id"] == "t-rerun"
    assert (notice["status"]["phase"], notice["status"]["reason"]) == ("failed", "PartialFailure")
    assert notice["status"]["error"]["frames_sent"] == 1
    assert notice["status"]["error"]["message"] == "failed after its frame on attempt 1"
    assert notice["payload"]["details"]["error_type"] == "ValueError"
    task = h.store.get_task("t-rerun")
    assert task is not None
    assert (task["status"], task["step"]) == ("running", "processing")  # the claim only: no final status


def test_p_abi_19_r3_serialization_error_is_a_handler_error_and_is_retried(harness: Callable[..., Harness]) -> None:
    """P-ABI-19 (R3): a frame that cannot be encoded is an ordinary handler error (it was an infrastructure error,
    P-ABI-20): a policy whose rules name ``SerializationError`` retries it, and nothing goes to x-sump."""
    resiliency = {
        "policies": {"default": {"max_attempts": 5, "initial_delay": 0, "jitter": False}},
        "rules": [{"errors": ["SerializationError"], "policy": "default"}],
    }
    h = harness("unserialisable", resiliency)
    h.store.create_task(task_id="t-nan", actor="normalize", payload=INPUT)
    assert h.handle(envelope("t-nan")) == []
    [retry] = h.drain("normalize")
    assert (retry["status"]["phase"], retry["status"]["max_attempts"]) == ("retrying", 5), "the policy retries"
    assert "frame 0 cannot be serialised" in retry["status"]["error"]["message"]
    assert h.drain("x-sump") == [] and h.drain("x-sink") == [] and h.drain("analyze") == []


def test_p_res_7_max_duration_exhausts_before_max_attempts(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=10, initial_delay=0, max_duration="30s"))
    h.handle(envelope("t-dur"))
    [retry] = h.drain("normalize")
    h.now = NOW + timedelta(seconds=30)
    h.handle(retry)
    [out] = h.drain("x-sink")
    assert out["status"]["reason"] == "PolicyExhausted"
    assert (out["status"]["attempt"], out["status"]["max_attempts"]) == (2, 10)


def test_p_res_7_retry_past_the_deadline_is_not_scheduled(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=5, initial_delay=10, jitter=False))
    assert h.handle(envelope("t-late", deadline=timedelta(seconds=10))) == []
    assert h.drain("normalize") == []
    [out] = h.drain("x-sink")
    assert out["status"]["reason"] == "PolicyExhausted"
    assert out["status"]["attempt"] == 1


def test_p_res_4_error_matching_no_rule_and_no_default_is_runtime_error(harness: Callable[..., Harness]) -> None:
    resiliency = {"policies": {"keys": {}}, "rules": [{"errors": ["KeyError"], "policy": "keys"}]}
    h = harness("mutate_then_fail", resiliency)
    assert h.handle(envelope("t-nopol")) == []
    assert h.drain("normalize") == []
    [out] = h.drain("x-sink")
    assert out["status"]["reason"] == "RuntimeError"
    assert (out["status"]["attempt"], out["status"]["max_attempts"]) == (1, 1)
    assert out["payload"]["original_payload"] == INPUT


def test_p_res_12_on_exhausted_shifts_the_route_onto_the_chain(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=1, on_exhausted=["summarize", "analyze"]))
    h.store.create_task(task_id="t-route", actor="normalize", payload=INPUT)
    env = envelope("t-route")
    assert h.handle(env) == []
    assert h.drain("x-sink") == []
    assert h.drain("normalize") == []
    [out] = h.drain("summarize")
    assert out["route"] == {"prev": ["intake", "normalize"], "curr": "summarize", "next": ["analyze"]}
    status = out["status"]
    assert {k: status[k] for k in ("phase", "reason", "actor", "attempt", "max_attempts")} == {
        "phase": "failed",
        "reason": "PolicyRouted",
        "actor": "normalize",
        "attempt": 1,
        "max_attempts": 1,
    }
    assert status["deadline_at"] == env["status"]["deadline_at"]
    assert out["payload"]["error"] == "ValueError: model returned no text"
    assert out["payload"]["original_payload"] == INPUT
    task = h.store.get_task("t-route")
    assert task is not None
    assert task["status"] == "running", "the chain decides the outcome (P-RES-13)"


def test_p_res_12_on_exhausted_honours_route_overrides(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=1, on_exhausted=["summarize"]))
    h.handle(envelope("t-ovr", headers={"x-asya-route-override": {"summarize": "analyze"}}))
    assert h.drain("summarize") == []
    [out] = h.drain("analyze")
    assert out["route"]["curr"] == "summarize"
    assert out["headers"]["x-asya-route-resolved"] == {"summarize": {"target": "analyze", "by": "normalize"}}


def test_p_route_8_on_exhausted_destination_without_a_queue_goes_to_sump(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(max_attempts=1, on_exhausted=["summarize"]))
    h.store.create_task(task_id="t-lost", actor="normalize", payload=INPUT)
    assert h.handle(envelope("t-lost", headers={"x-asya-route-override": {"summarize": "ghost"}})) == []
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "UnknownActor"
    assert "ghost" in sump["payload"]["details"]["message"]
    assert sump["payload"]["original_payload"]["original_payload"] == INPUT, "the undeliverable error payload"
    task = h.store.get_task("t-lost")
    assert task is not None
    assert task["status"] == "failed"


# -- chained delays (P-RES-9, step 3 of P-PROC-2) ---------------------------------------------------------------------


def test_p_res_9_long_delay_is_sent_as_900_seconds_with_delay_until(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(initial_delay="2000s", max_interval=0, jitter=False))
    h.handle(envelope("t-long", deadline=timedelta(hours=2)))
    [(delay, body)] = h.sent_to("normalize")
    assert delay == 900
    assert body["headers"]["x-asya-delay-until"] == format_ts(NOW + timedelta(seconds=2000))
    assert body["status"]["attempt"] == 2


def test_p_res_9_step_3_resends_a_delayed_envelope_unchanged(harness: Callable[..., Harness]) -> None:
    h = harness("mutate_then_fail", policy(initial_delay=0))
    h.store.create_task(task_id="t-wait", actor="normalize", payload=INPUT)
    env = envelope("t-wait", headers={"x-asya-delay-until": format_ts(NOW + timedelta(seconds=1100))})
    env["status"].update(phase="retrying", attempt=2, max_attempts=3)
    with h.writes("t-wait") as writes:
        assert h.handle(env) == []
    [(delay, body)] = h.sent_to("normalize")
    assert delay == 900
    assert body == env, "re-sent unchanged: same attempt, same headers, same status"
    assert writes.requests == [], "no status write and no claim"
    assert h.drain("x-sink") == []
    h.now = NOW + timedelta(seconds=900)
    h.sends.clear()
    h.drain("normalize")
    assert h.handle(env) == []
    [(delay, _)] = h.sent_to("normalize")
    assert delay == 200, "the remaining delay"


def test_p_res_9_step_3_continues_once_the_delay_is_over(harness: Callable[..., Harness]) -> None:
    h = harness("fails_before_attempt", policy(initial_delay=0))
    env = envelope(
        "t-done-waiting",
        headers={"x-asya-delay-until": format_ts(NOW + timedelta(seconds=1))},
        payload={"succeed_at": 2},
    )
    env["status"].update(phase="retrying", attempt=2, max_attempts=3)
    assert h.handle(env) == []
    assert h.sent_to("normalize") == []
    [out] = h.drain("analyze")
    assert out["payload"]["succeeded_on"] == 2
    assert "x-asya-delay-until" not in out["headers"]
