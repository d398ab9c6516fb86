"""``make bench``'s AWS request meter on real boto3 clients against moto: its botocore hooks see every call, bill
writes from the items as they were before and after (through an un-hooked shadow client), and attribute calls to the
component the calling thread declared (GW-DATA-8 is measured with it)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from asya.store import TaskStore
from bench.meter import Meter

pytestmark = pytest.mark.functional


@pytest.fixture
def metered(mesh: Any) -> tuple[Meter, Any]:
    meter = Meter(shadow_dynamodb=mesh.aws.session.client("dynamodb"))
    meter.attach(mesh.aws.sqs)
    meter.attach(mesh.aws.dynamodb)
    meter.attach(mesh.aws.s3)
    return meter, mesh


def test_sqs_calls_are_counted_per_component_with_their_chunks(metered: tuple[Meter, Any]) -> None:
    meter, mesh = metered
    url = mesh.resources.queue_urls["normalize"]
    with meter.component("normalize"):
        mesh.aws.sqs.send_message(QueueUrl=url, MessageBody="x" * (70 * 1024))
        got = mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert len(got["Messages"]) == 1
    usage = meter.snapshot()
    send = usage[("normalize", "sqs", "SendMessage")]
    assert (send.requests, send.billed_requests) == (1, 2)
    receive = usage[("normalize", "sqs", "ReceiveMessage")]
    assert (receive.requests, receive.billed_requests, receive.empty_receives) == (2, 3, 1)


def test_task_writes_are_billed_from_the_items_before_and_after(metered: tuple[Meter, Any]) -> None:
    meter, mesh = metered
    store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb)
    with meter.component("gateway"):
        store.create_task(
            task_id="t-1",
            actor="normalize",
            flow="text-pipeline",
            payload={"text": "x" * 600},  # too large for the task item: the body item is billed too (GW-DATA-8 R3)
            deadline_at="2099-01-01T00:00:00Z",
        )
    with meter.component("normalize"):
        store.report_running(
            "t-1",
            step="processing",
            actor="normalize",
            route_prev=[],
            route_curr="normalize",
            route_next=["analyze", "summarize"],
        )
        assert store.statuses(["t-1", "t-unknown"]) == {"t-1": "running"}
    usage = meter.snapshot()
    create = usage[("gateway", "dynamodb", "PutItem")]
    assert create.requests == 2
    assert create.wru_table == 2  # the task and body items, each under 1 KB; event 1 is the task item (GW-CREATE-7)
    assert create.wru_index == 2  # keys-only by_created, and long_deadlines (a deadline years away); no by_outcome
    assert ("gateway", "dynamodb", "TransactWriteItems") not in usage  # transactions bill twice (GW-DATA-8)
    update = usage[("normalize", "dynamodb", "UpdateItem")]
    assert (update.requests, update.wru_table) == (1, 1)
    assert update.wru_index == 0  # R2: a status change changes no index key (GW-DATA-8)
    assert ("normalize", "dynamodb", "PutItem") not in usage  # R2: no status event item
    preflight = usage[("normalize", "dynamodb", "BatchGetItem")]
    assert preflight.requests == 1
    assert preflight.rru == 2  # both keys, found or not, strongly consistent
    with meter.component("x-sink"):
        assert store.report_final("t-1", status="failed", error="boom", error_details={"message": "boom"})
    usage = meter.snapshot()
    final = usage[("x-sink", "dynamodb", "UpdateItem")]
    # the terminal write: the task item, by_outcome entered and long_deadlines left
    assert (final.requests, final.wru_table, final.wru_index) == (1, 1, 2)
    result = usage[("x-sink", "dynamodb", "PutItem")]
    assert (result.requests, result.wru, result.wru_index) == (1, 1, 0)  # the result item


def test_calls_from_undeclared_threads_go_to_the_gateway_or_backstop(metered: tuple[Meter, Any]) -> None:
    meter, mesh = metered
    url = mesh.resources.queue_urls["analyze"]

    def send() -> None:
        mesh.aws.sqs.send_message(QueueUrl=url, MessageBody="b")

    for name in ("AnyIO worker thread", "asya-backstop"):
        worker = threading.Thread(target=send, name=name)
        worker.start()
        worker.join()
    usage = meter.snapshot()
    assert usage[("gateway", "sqs", "SendMessage")].requests == 1
    assert usage[("backstop", "sqs", "SendMessage")].requests == 1
    meter.reset()
    assert meter.snapshot() == {}


def test_a_meter_without_shadow_counts_writes_without_billing_them(mesh: Any) -> None:
    meter = Meter()
    meter.attach(mesh.aws.dynamodb)
    key = {"pk": {"S": "BENCH#1"}, "sk": {"S": "X"}}
    mesh.aws.dynamodb.put_item(TableName=mesh.resources.table, Item=key)
    meter.enabled = False
    mesh.aws.dynamodb.put_item(TableName=mesh.resources.table, Item=key)
    [(component, usage)] = [(k[0], v) for k, v in meter.snapshot().items()]
    assert (component, usage.requests, usage.wru) == ("gateway", 1, 0)
