"""Deadline timers against moto (GATEWAY GW-BACK-1, -2, -5, -6, GW-CREATE-7 step 6, GW-CANCEL-1; PROTOCOL P-TIME-9).

Timers are armed by the real gateway (or :class:`DeadlineTimers`), travel through moto's SQS with their real
``DelaySeconds`` (moto's SQS clock is moved with :class:`tests.clocks.SqsClock`), are received as the event source
mapping receives them and handed to :meth:`Backstop.handle` as a real SQS event. Races and faults are injected with
botocore event hooks on real clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from asya.store import StatusUpdate, TaskStore
from asya.timeutil import format_ts
from asya_gateway import GatewayConfig, create_app
from asya_gateway.backstop import Backstop
from asya_gateway.timers import DeadlineTimers, Timer
from asya_local.lambda_event import sqs_event
from tests.asgi import asgi_client
from tests.clocks import ManualClock, SqsClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
TIMER_ARN = "arn:aws:sqs:us-east-1:123456789012:asya-demo-x-deadline"


def _at(seconds: float) -> str:
    return format_ts(START + timedelta(seconds=seconds))


class Metrics:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, namespace: str, count: int) -> None:
        self.calls.append((namespace, count))


@dataclass
class Env:
    """One mesh in moto with the gateway's clock, moto's SQS clock moved in step, the store, timers and backstop."""

    mesh: Any
    clock: ManualClock
    sqs_clock: SqsClock
    store: TaskStore
    timers: DeadlineTimers
    backstop: Backstop
    metrics: Metrics

    @property
    def queue_url(self) -> str:
        return str(self.mesh.resources.queue_urls["x-deadline"])

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.sqs_clock.advance(seconds)

    def receive(self) -> list[Any]:
        messages: list[Any] = self.mesh.aws.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        return messages

    def deliver(self, messages: list[Any], backstop: Backstop | None = None) -> dict[str, Any]:
        """Hand one batch to the backstop as Lambda would, then delete what it did not report failed."""
        response = (backstop or self.backstop).handle(sqs_event(messages, queue_arn=TIMER_ARN, region="us-east-1"))
        failed = {entry["itemIdentifier"] for entry in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.mesh.aws.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return response

    def status(self, task_id: str) -> dict[str, Any]:
        view = self.store.get_task(task_id, enforce_deadline=False)
        assert view is not None
        return view

    def changes(self, task_id: str) -> int:
        """The task record's last change number (GW-DATA-3): 1 at creation, one more per accepted change."""
        return int(self.status(task_id)["last_event_id"])


@pytest.fixture
def env(mesh: Any, monkeypatch: pytest.MonkeyPatch) -> Env:
    sqs_clock = SqsClock().install(monkeypatch)
    clock = ManualClock(START)
    store = mesh.store(clock)
    timers = DeadlineTimers(namespace="demo", sqs=mesh.aws.sqs, clock=clock)
    metrics = Metrics()
    backstop = Backstop(store, namespace="demo", timers=timers, clock=clock, metric=metrics)
    return Env(mesh, clock, sqs_clock, store, timers, backstop, metrics)


def _create(env: Env, task_id: str, deadline_in: float) -> str:
    deadline_at = _at(deadline_in)
    env.store.create_task(task_id=task_id, actor="normalize", deadline_at=deadline_at)
    return deadline_at


# ---------------------------------------------------------------- the timer comes due and fails the task


def test_gw_back_1_gw_back_2_a_short_deadline_fails_via_its_timer_when_it_comes_due(env: Env) -> None:
    deadline_at = _create(env, "t1", 60)
    assert env.timers.arm("t1", deadline_at) is True

    env.advance(59)
    assert env.receive() == []  # the timer stays invisible until the deadline
    env.advance(1)
    [message] = env.receive()
    assert json.loads(message["Body"]) == {"id": "t1", "deadline_at": deadline_at}

    assert env.deliver([message]) == {"batchItemFailures": []}
    view = env.status("t1")
    assert (view["status"], view["error"], view["message"]) == ("failed", "task timed out", "task timed out")
    assert env.metrics.calls == [("demo", 1)]  # GW-BACK-6
    assert env.receive() == []


def test_gw_back_1_a_deadline_more_than_900_s_away_sends_no_timer(env: Env) -> None:
    assert env.timers.arm("t1", _at(901)) is False
    assert env.timers.arm("t2", _at(900)) is True  # the SQS delay limit itself still fits a timer
    env.advance(900)
    assert [json.loads(m["Body"])["id"] for m in env.receive()] == ["t2"]


def test_gw_back_1_queue_url_is_built_from_the_account_without_get_queue_url(env: Env) -> None:
    looked_up: list[str] = []
    sqs = env.mesh.aws.sqs
    sqs.meta.events.register("before-call.sqs.GetQueueUrl", lambda **kw: looked_up.append("GetQueueUrl"))
    built = DeadlineTimers(namespace="demo", sqs=sqs, account_id="123456789012", clock=env.clock)
    assert built.queue_url() == env.queue_url
    assert built.arm("t1", _at(0)) and built.arm("t2", _at(0))
    assert looked_up == []
    # without an account id the URL is looked up once, then cached
    looked_up_once = DeadlineTimers(namespace="demo", sqs=sqs, clock=env.clock)
    assert looked_up_once.arm("t3", _at(0)) and looked_up_once.arm("t4", _at(0))
    assert looked_up == ["GetQueueUrl"]
    assert sorted(json.loads(m["Body"])["id"] for m in env.receive()) == ["t1", "t2", "t3", "t4"]


# ---------------------------------------------------------------- timers that drop themselves (nothing disarms)


def test_gw_back_1_gw_cancel_1_timers_of_terminal_paused_canceled_and_unknown_tasks_drop_themselves(
    env: Env,
) -> None:
    for task_id in ("done", "failed", "paused", "canceled"):
        env.timers.arm(task_id, _create(env, task_id, 30))
    env.timers.arm("unknown", _at(30))
    assert env.store.report_final("done", status="succeeded", result={"ok": True})
    assert env.store.report_final("failed", status="failed", error="boom")
    assert env.store.apply_status("paused", StatusUpdate(status="paused", pause_metadata={"prompt": "p"}))
    assert env.store.cancel("canceled") == "canceled"
    before = {task_id: env.status(task_id) for task_id in ("done", "failed", "paused", "canceled")}

    env.advance(31)
    messages = env.receive()
    assert len(messages) == 5
    assert env.deliver(messages) == {"batchItemFailures": []}

    after = {task_id: env.status(task_id) for task_id in before}
    assert after == before  # GW-BACK-5: the paused task is never timed out; terminal ones keep their outcome
    assert env.store.get_task("unknown") is None
    assert env.metrics.calls == [("demo", 0)]
    assert env.receive() == []  # dropped timers are acked, not retried


def test_gw_back_5_p_time_9_a_resumed_task_drops_the_old_timer_and_fails_by_the_new_one(env: Env) -> None:
    old = _create(env, "t1", 30)
    env.timers.arm("t1", old)
    assert env.store.apply_status("t1", StatusUpdate(status="paused", pause_metadata={"prompt": "p"}))
    env.advance(20)
    new = _at(80)  # resume renews the deadline and arms a new timer (GW-BACK-1: the gateway arms at resume)
    assert env.store.apply_status("t1", StatusUpdate(status="running", resume=True, deadline_at=new))
    env.timers.arm("t1", new)

    env.advance(11)  # the old deadline passes
    [stale] = env.receive()
    assert json.loads(stale["Body"])["deadline_at"] == old
    assert env.deliver([stale]) == {"batchItemFailures": []}
    assert env.status("t1")["status"] == "running"

    env.advance(49)  # the new one
    [fresh] = env.receive()
    assert env.deliver([fresh]) == {"batchItemFailures": []}
    assert (env.status("t1")["status"], env.status("t1")["error"]) == ("failed", "task timed out")
    assert env.metrics.calls == [("demo", 0), ("demo", 1)]


# ---------------------------------------------------------------- duplicates and races


def test_gw_back_2_a_duplicate_timer_is_harmless(env: Env) -> None:
    deadline_at = _create(env, "t1", 10)
    env.timers.arm("t1", deadline_at)
    env.timers.arm("t1", deadline_at)  # a retried arm: the same timer twice
    env.advance(10)
    messages = env.receive()
    assert len(messages) == 2
    assert env.deliver(messages) == {"batchItemFailures": []}  # both in one batch
    # and a third copy in a later batch, as a redelivery
    env.timers.send(Timer("t1", deadline_at), delay_seconds=0)
    assert env.deliver(env.receive()) == {"batchItemFailures": []}

    assert env.status("t1")["status"] == "failed"
    assert env.changes("t1") == 2  # created, then timed out once
    assert env.metrics.calls == [("demo", 1), ("demo", 0)]


def test_gw_back_2_concurrent_deliveries_time_the_task_out_once(env: Env, aws: Any) -> None:
    deadline_at = _create(env, "t1", 10)
    env.timers.arm("t1", deadline_at)
    env.timers.arm("t1", deadline_at)
    env.advance(10)
    first, second = ([m] for m in env.receive())
    other_clients = aws.session.client("dynamodb")
    other_store = TaskStore(table=env.store.table, dynamodb=other_clients, clock=env.clock)
    other = Backstop(other_store, namespace="demo", timers=env.timers, clock=env.clock, metric=env.metrics)
    raced: list[dict[str, Any]] = []

    def other_delivery_runs_now(**_: Any) -> None:
        if not raced:  # between this backstop's read and its conditional write
            raced.append(env.deliver(second, backstop=other))

    env.store.dynamodb.meta.events.register("after-call.dynamodb.GetItem", other_delivery_runs_now)
    assert env.deliver(first) == {"batchItemFailures": []}
    assert raced == [{"batchItemFailures": []}]
    assert env.status("t1")["status"] == "failed"
    assert env.changes("t1") == 2  # created, then timed out once
    assert sorted(env.metrics.calls) == [("demo", 0), ("demo", 1)]  # the loser's failed condition is a drop


def test_gw_back_4_a_task_finished_between_the_read_and_the_write_keeps_its_success(env: Env, aws: Any) -> None:
    deadline_at = _create(env, "t1", 10)
    env.timers.arm("t1", deadline_at)
    env.advance(10)
    sink_store = TaskStore(table=env.store.table, dynamodb=aws.session.client("dynamodb"), clock=env.clock)

    finished: list[bool] = []

    def sink_finishes(**_: Any) -> None:
        if not finished:  # x-sink's final write lands between the backstop's read and its conditional write
            finished.append(sink_store.report_final("t1", status="succeeded", result=1))

    env.store.dynamodb.meta.events.register("after-call.dynamodb.GetItem", sink_finishes)
    assert env.deliver(env.receive()) == {"batchItemFailures": []}
    assert finished == [True]
    assert env.status("t1")["status"] == "succeeded"
    assert env.metrics.calls == [("demo", 0)]


# ---------------------------------------------------------------- early timers re-arm


def test_gw_back_1_a_timer_due_before_its_deadline_rearms_itself(env: Env) -> None:
    deadline_at = _create(env, "t1", 2000)  # beyond one SQS delay: a chain of timers
    env.timers.send(Timer("t1", deadline_at), delay_seconds=0)
    sent: list[int] = []
    env.mesh.aws.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessage", lambda params, **_: sent.append(params["DelaySeconds"])
    )
    assert env.deliver(env.receive()) == {"batchItemFailures": []}
    assert sent == [900]
    assert env.status("t1")["status"] == "pending"

    env.advance(900)
    assert env.deliver(env.receive()) == {"batchItemFailures": []}
    assert sent == [900, 900]
    env.advance(900)
    assert env.deliver(env.receive()) == {"batchItemFailures": []}
    assert sent == [900, 900, 200]
    env.advance(199)
    assert env.receive() == []
    env.advance(1)
    assert env.deliver(env.receive()) == {"batchItemFailures": []}
    assert env.status("t1")["status"] == "failed"
    assert env.metrics.calls == [("demo", 0), ("demo", 0), ("demo", 0), ("demo", 1)]


# ---------------------------------------------------------------- errors stay per record


def test_gw_back_2_one_timer_error_never_stops_the_others_and_sqs_redelivers_it(env: Env) -> None:
    for task_id in ("a", "b"):
        env.timers.arm(task_id, _create(env, task_id, 5))
    env.timers.send(Timer("c", _at(5)), delay_seconds=5)
    env.mesh.aws.sqs.send_message(QueueUrl=env.queue_url, MessageBody='{"id": "x"}', DelaySeconds=5)
    env.advance(5)
    messages = env.receive()
    by_body = {m["Body"]: m["MessageId"] for m in messages}

    def throttle_a(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["pk"]["S"] == "TASK#a":
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "X")

    env.store.dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", throttle_a)
    response = env.deliver(messages)
    failed = {entry["itemIdentifier"] for entry in response["batchItemFailures"]}
    a_body = Timer("a", _at(5)).to_body()
    assert failed == {by_body[a_body], by_body['{"id": "x"}']}  # the malformed body goes on to the DLQ
    env.store.dynamodb.meta.events.unregister("provide-client-params.dynamodb.GetItem", throttle_a)
    assert env.status("b")["status"] == "failed"
    assert env.status("a")["status"] == "pending"
    env.sqs_clock.advance(60)  # the timer queue's visibility timeout
    again = [m for m in env.receive() if m["Body"] == a_body]
    assert env.deliver(again) == {"batchItemFailures": []}
    assert env.status("a")["status"] == "failed"


def test_gw_back_1_a_failed_rearm_fails_its_record(env: Env) -> None:
    deadline_at = _create(env, "t1", 100)
    env.timers.send(Timer("t1", deadline_at), delay_seconds=0)
    messages = env.receive()

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "KmsThrottled", "Message": "no"}}, "SendMessage")

    env.mesh.aws.sqs.meta.events.register("before-call.sqs.SendMessage", refuse)
    assert env.deliver(messages) == {"batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]}


# ---------------------------------------------------------------- the gateway arms at create (GW-CREATE-7 step 6)


@dataclass
class Gw:
    client: httpx.Client
    env: Env


@pytest.fixture
def gw(env: Env) -> Iterator[Gw]:
    app = create_app(
        GatewayConfig(account_id="123456789012"),
        manifest=env.mesh.manifest,
        store=env.store,
        sqs=env.mesh.aws.sqs,
        clock=env.clock,
    )
    with asgi_client(app) as client:
        yield Gw(client=client, env=env)


def test_gw_create_7_create_arms_one_timer_for_the_flow_deadline(gw: Gw) -> None:
    sent: list[dict[str, Any]] = []
    gw.env.mesh.aws.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessage",
        lambda params, **_: sent.append(params) if params["QueueUrl"].endswith("x-deadline") else None,
    )
    created = gw.client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "a"}}).json()
    assert created["deadline_at"] == _at(120)  # the flow's timeout
    [timer] = sent
    assert timer["DelaySeconds"] == 120
    assert json.loads(timer["MessageBody"]) == {"id": created["id"], "deadline_at": _at(120)}

    # no timer for a deadline beyond 900 s (the long_deadlines sweep) nor for a task without one
    long = gw.client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "b"}, "timeout": 3600})
    none = gw.client.post("/api/v1/mesh/?actor=analyze", json={"payload": {}})
    assert (long.status_code, none.status_code) == (201, 201)
    assert len(sent) == 1

    gw.env.advance(119)
    assert gw.env.receive() == []
    gw.env.advance(1)
    assert gw.env.deliver(gw.env.receive()) == {"batchItemFailures": []}
    assert gw.env.status(created["id"])["status"] == "failed"


def test_gw_create_7_a_timer_that_cannot_be_armed_creates_no_task(gw: Gw) -> None:
    """The timer goes before the record (GW-OVL-4): a timer that cannot be armed leaves nothing to fail or undo."""
    sqs = gw.env.mesh.aws.sqs
    sqs.delete_queue(QueueUrl=gw.env.queue_url)
    response = gw.client.post("/api/v1/mesh/?actor=analyze", json={"payload": {}, "timeout": 60})
    assert (response.status_code, response.json()) == (500, {"error": "failed to dispatch message"})
    assert gw.env.store.list_tasks()["messages"] == []
    # the envelope never left: nothing runs for a task whose deadline nothing would enforce
    url = gw.env.mesh.resources.queue_urls["analyze"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    # a task without a deadline needs no timer
    assert gw.client.post("/api/v1/mesh/?actor=analyze", json={"payload": {}}).status_code == 201
