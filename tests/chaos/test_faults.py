"""The chaos injector against in-process moto: each hook plays its fault on a real call of an actor's worker thread
(``esm-{queue}-{n}``), and never on the gateway's threads."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from chaos.faults import FaultRates, FaultRatesError, Injector, InvocationCrashError
from chaos.forgery import Forger
from tests.conftest import AwsClients

pytestmark = pytest.mark.chaos


def test_rates_name_the_bad_fault_and_value() -> None:
    with pytest.raises(FaultRatesError, match=r"handler_error: must be a number in 0\.\.1, got 1\.5"):
        FaultRates(handler_error=1.5)
    with pytest.raises(FaultRatesError, match="unknown fault 'meteor'"):
        FaultRates.of({"meteor": 0.1})
    assert FaultRates.of({"duplicate": 0.2}).active() == {"duplicate": 0.2}


@pytest.fixture
def rig(aws: AwsClients) -> dict[str, Any]:
    queues = {name: aws.sqs.create_queue(QueueName=f"asya-t-{name}")["QueueUrl"] for name in ("work", "x-sink")}
    aws.dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    aws.s3.create_bucket(Bucket="chaos-bucket")
    return {"aws": aws, "queues": queues}


def _injector(rig: dict[str, Any], **rates: float) -> Injector:
    aws: AwsClients = rig["aws"]
    injector = Injector(
        FaultRates.of(rates),
        queue_actors={"asya-t-work": "work", "asya-t-x-sink": "x-sink"},
        queue_urls=rig["queues"],
        user_actors=frozenset({"work"}),
        raw_sqs=aws.session.client("sqs"),
    )
    injector.attach(sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    return injector


def _as_worker(actor: str, rig: dict[str, Any], body: dict[str, Any], then: Callable[[], Any]) -> BaseException | None:
    """Receive ``body`` from ``actor``'s queue in a thread named like its ESM worker, then run ``then`` there; the
    exception it raised, if any."""
    aws: AwsClients = rig["aws"]
    url = rig["queues"][actor]
    aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    raised: list[BaseException] = []

    def work() -> None:
        aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"])
        try:
            then()
        except BaseException as exc:  # the test inspects it, InvocationCrashError included
            raised.append(exc)

    thread = threading.Thread(target=work, name=f"esm-asya-t-{actor}-0")
    thread.start()
    thread.join(10)
    return raised[0] if raised else None


def _depth(rig: dict[str, Any], actor: str) -> int:
    attributes = rig["aws"].sqs.get_queue_attributes(
        QueueUrl=rig["queues"][actor], AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_throttling_hits_an_actor_worker_and_spares_other_threads(rig: dict[str, Any]) -> None:
    injector = _injector(rig, dynamodb_throttle=1.0)
    dynamodb = rig["aws"].dynamodb
    raised = _as_worker("work", rig, {"id": "e1"}, lambda: dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}}))
    assert isinstance(raised, ClientError)
    assert raised.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})  # this thread is no worker: untouched
    assert injector.played["dynamodb_throttle"] == 1
    assert injector.invocations[0].faults == ["dynamodb_throttle"]


def test_a_duplicate_is_a_second_real_copy_of_the_sent_body(rig: dict[str, Any]) -> None:
    _injector(rig, duplicate=1.0)
    sink = rig["queues"]["x-sink"]
    sqs = rig["aws"].sqs
    assert (
        _as_worker("work", rig, {"id": "e1"}, lambda: sqs.send_message(QueueUrl=sink, MessageBody='{"id":"c"}')) is None
    )
    assert _depth(rig, "x-sink") == 2


def test_a_crash_after_frame_0_left_kills_the_invocation_with_the_message_sent(rig: dict[str, Any]) -> None:
    _injector(rig, crash_after_send=1.0)
    sink = rig["queues"]["x-sink"]
    sqs = rig["aws"].sqs
    child = _as_worker("work", rig, {"id": "e1"}, lambda: sqs.send_message(QueueUrl=sink, MessageBody='{"id":"c"}'))
    assert child is None  # a child's send is not frame 0: no crash yet
    sqs.purge_queue(QueueUrl=rig["queues"]["work"])
    frame0 = _as_worker("work", rig, {"id": "e1"}, lambda: sqs.send_message(QueueUrl=sink, MessageBody='{"id":"e1"}'))
    assert isinstance(frame0, InvocationCrashError)
    assert _depth(rig, "x-sink") == 2


def test_a_send_failure_sends_nothing(rig: dict[str, Any]) -> None:
    _injector(rig, send_failure=1.0)
    sink = rig["queues"]["x-sink"]
    sqs = rig["aws"].sqs
    raised = _as_worker("work", rig, {"id": "e1"}, lambda: sqs.send_message(QueueUrl=sink, MessageBody="{}"))
    assert isinstance(raised, ClientError)
    assert raised.response["Error"]["Code"] == "InternalError"
    assert _depth(rig, "x-sink") == 0


def test_s3_failures_hit_x_sink_only(rig: dict[str, Any]) -> None:
    _injector(rig, s3_failure=1.0)
    s3 = rig["aws"].s3
    ok = _as_worker("work", rig, {"id": "e1"}, lambda: s3.put_object(Bucket="chaos-bucket", Key="k1", Body=b"x"))
    assert ok is None
    raised = _as_worker("x-sink", rig, {"id": "e1"}, lambda: s3.put_object(Bucket="chaos-bucket", Key="k2", Body=b"x"))
    assert isinstance(raised, ClientError)
    assert "Contents" not in s3.list_objects_v2(Bucket="chaos-bucket", Prefix="k2")


def test_a_child_writing_a_task_item_is_written_down(rig: dict[str, Any]) -> None:
    """P-FAN-3: the write to ``TASK#t1`` comes from an invocation holding only the child ``c1``."""
    injector = _injector(rig)
    dynamodb = rig["aws"].dynamodb
    item = {"pk": {"S": "TASK#t1"}, "sk": {"S": "TASK"}}
    assert (
        _as_worker("work", rig, {"id": "c1", "parent_id": "t1"}, lambda: dynamodb.put_item(TableName="t", Item=item))
        is None
    )
    assert injector.child_task_writes == [{"actor": "work", "task": "t1", "operation": "PutItem"}]


def test_a_late_child_copy_is_kept_and_sent_again_after_the_workload(rig: dict[str, Any]) -> None:
    """P-ACK-7 (R3): only child envelopes (a ``parent_id``) are kept; each goes back to the queue it was sent to."""
    injector = _injector(rig, late_child_copy=1.0)
    sink = rig["queues"]["x-sink"]
    sqs = rig["aws"].sqs
    child = json.dumps({"id": "c1", "parent_id": "e1"})

    def send() -> None:
        sqs.send_message_batch(
            QueueUrl=sink,
            Entries=[{"Id": "0", "MessageBody": child}, {"Id": "1", "MessageBody": '{"id":"e1"}'}],
        )

    assert _as_worker("work", rig, {"id": "e1"}, send) is None
    assert injector.late_copies == [(sink, child)] and _depth(rig, "x-sink") == 2
    assert injector.send_late_copies() == 1
    assert _depth(rig, "x-sink") == 3 and set(injector.late_sent) == {"c1"} and injector.late_copies == []


def _forger(rig: dict[str, Any], answer: int, seen: list[tuple[str, str | None]], **kwargs: Any) -> Forger:
    def reply(request: httpx.Request) -> httpx.Response:
        seen.append((json.loads(request.content)["status"], request.headers.get("x-asya-reporter-key")))
        return httpx.Response(answer)

    injector = _injector(rig, forged_status=1.0)
    return Forger("http://gateway", injector, transport=httpx.MockTransport(reply), **kwargs)


def test_forged_posts_send_every_crew_status_with_each_credential(rig: dict[str, Any]) -> None:
    """GW-EVT-1/3 (R3): four crew-only statuses, with the client's credentials and the reporter's key."""
    seen: list[tuple[str, str | None]] = []
    forger = _forger(rig, 400, seen, reporter_key="rk")
    forger.on_create("t1")
    statuses = ["paused", "succeeded", "failed", "canceled"]
    assert seen == [(s, None) for s in statuses] + [(s, "rk") for s in statuses]
    assert forger.accepted() == [] and len(forger.posts) == 8


def test_a_forged_post_answered_2xx_is_accepted(rig: dict[str, Any]) -> None:
    seen: list[tuple[str, str | None]] = []
    forger = _forger(rig, 204, seen)
    forger.on_create("t1")
    accepted = [str(post) for post in forger.accepted()]
    assert len(accepted) == 4 and accepted[0] == "t1: 'paused' with the client's credential answered 204"
