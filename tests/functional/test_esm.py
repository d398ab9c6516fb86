"""The event source mapping emulator against moto SQS (P-ACK-1, P-ACK-4, P-ACK-5, P-ACK-6, P-MAN-4)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from asya_local.esm import EsmConfig, EventSourceMapping, batch_failures
from asya_local.lambda_event import LambdaContext

pytestmark = pytest.mark.functional

EVENTS = Path(__file__).resolve().parent.parent / "events"


class Recorder:
    """A handler that records what it got and answers with a configurable function."""

    def __init__(self, answer: Any = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[LambdaContext] = []
        self._answer = answer

    def __call__(self, event: dict[str, Any], context: LambdaContext) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        if callable(self._answer):
            return self._answer(event, context)
        return self._answer


def _queues(aws: Any, *, visibility: int = 30, max_receive_count: int = 3) -> tuple[str, str]:
    dlq = aws.sqs.create_queue(QueueName="esm-test-dlq")["QueueUrl"]
    dlq_arn = aws.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = aws.sqs.create_queue(
        QueueName="esm-test",
        Attributes={
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}),
        },
    )["QueueUrl"]
    return queue, dlq


def _send(aws: Any, queue: str, count: int, **kwargs: Any) -> list[str]:
    return [aws.sqs.send_message(QueueUrl=queue, MessageBody=f"m{i}", **kwargs)["MessageId"] for i in range(count)]


def _counts(aws: Any, queue: str) -> tuple[int, int]:
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=queue,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def _esm(aws: Any, queue: str, handler: Any, **config: Any) -> EventSourceMapping:
    return EventSourceMapping(EsmConfig(function_name="asya-test-fn", queue_url=queue, **config), handler, sqs=aws.sqs)


def test_batch_size_is_honoured(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 7)
    handler = Recorder()
    esm = _esm(aws, queue, handler, batch_size=3)
    while esm.poll_once(wait_seconds=0):
        pass
    sizes = [len(event["Records"]) for event in handler.events]
    assert sum(sizes) == 7
    assert max(sizes) == 3
    assert esm.stats.records == 7
    assert esm.stats.deleted == 7
    assert _counts(aws, queue) == (0, 0)


def test_p_ack_1_records_not_in_batch_item_failures_are_deleted(aws: Any) -> None:
    queue, _ = _queues(aws)
    ids = _send(aws, queue, 3)
    handler = Recorder({"batchItemFailures": [{"itemIdentifier": ids[1]}]})
    esm = _esm(aws, queue, handler, batch_size=10)
    assert esm.poll_once(wait_seconds=0) == 3
    assert esm.stats.deleted == 2
    assert esm.stats.failures == 1
    # the failed record is in flight (invisible), the others are gone
    assert _counts(aws, queue) == (0, 1)


def test_p_ack_1_failed_record_is_redelivered_after_the_visibility_timeout(aws: Any) -> None:
    queue, _ = _queues(aws, visibility=1)
    (message_id,) = _send(aws, queue, 1)
    first = True

    def answer(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
        return {"batchItemFailures": []}

    handler = Recorder(answer)
    esm = _esm(aws, queue, handler)
    assert esm.poll_once(wait_seconds=0) == 1
    assert esm.poll_once(wait_seconds=0) == 0  # still invisible
    assert esm.poll_once(wait_seconds=5) == 1  # visible again after 1 s
    second = handler.events[1]["Records"][0]
    assert second["messageId"] == message_id
    assert second["attributes"]["ApproximateReceiveCount"] == "2"
    assert _counts(aws, queue) == (0, 0)


def test_p_ack_4_visibility_change_made_by_the_handler_is_honoured(aws: Any) -> None:
    queue, _ = _queues(aws, visibility=300)
    _send(aws, queue, 1)

    def answer(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        record = event["Records"][0]
        aws.sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0)
        return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}

    handler = Recorder(answer)
    esm = _esm(aws, queue, handler)
    assert esm.poll_once(wait_seconds=0) == 1
    # with the queue's 300 s timeout the record would stay hidden; the handler made it visible at once
    assert esm.poll_once(wait_seconds=0) == 1
    assert len(handler.events) == 2


def test_p_ack_5_crash_deletes_nothing_then_p_ack_6_redrive_to_the_dlq(aws: Any) -> None:
    queue, dlq = _queues(aws, visibility=1, max_receive_count=2)
    _send(aws, queue, 2)
    calls = 0

    def crash(event: dict[str, Any], context: LambdaContext) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    esm = _esm(aws, queue, crash, batch_size=10)
    assert esm.poll_once(wait_seconds=0) == 2
    assert esm.stats.crashes == 1
    assert esm.stats.deleted == 0
    assert _counts(aws, queue) == (0, 2)
    assert esm.poll_once(wait_seconds=5) == 2  # redelivered after the visibility timeout
    # the third receive finds both over maxReceiveCount: SQS moves them to the DLQ and returns nothing
    deadline = time.monotonic() + 10
    while _counts(aws, dlq)[0] < 2 and time.monotonic() < deadline:
        esm.poll_once(wait_seconds=1)
    assert calls == 2
    assert _counts(aws, queue) == (0, 0)
    bodies = sorted(
        m["Body"] for m in aws.sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
    )
    assert bodies == ["m0", "m1"]


@pytest.mark.parametrize(
    "answer",
    [
        "ok",
        {"batchItemFailures": "all"},
        {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]},
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"id": "wrong-key"}]},
        {"batchItemFailures": [object()]},
    ],
    ids=["string", "not-a-list", "unknown-id", "empty-id", "bad-key", "unserialisable"],
)
def test_p_ack_1_invalid_response_fails_the_whole_batch(aws: Any, answer: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 2)
    esm = _esm(aws, queue, Recorder(answer), batch_size=10)
    assert esm.poll_once(wait_seconds=0) == 2
    assert esm.stats.deleted == 0
    assert esm.stats.failures == 2
    assert _counts(aws, queue) == (0, 2)


@pytest.mark.parametrize("answer", [None, {}, {"batchItemFailures": None}, {"batchItemFailures": []}])
def test_p_ack_1_empty_responses_mean_complete_success(aws: Any, answer: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 2)
    esm = _esm(aws, queue, Recorder(answer), batch_size=10)
    esm.poll_once(wait_seconds=0)
    assert esm.stats.deleted == 2
    assert _counts(aws, queue) == (0, 0)


def test_batch_failures_reports_listed_ids() -> None:
    assert batch_failures({"batchItemFailures": [{"itemIdentifier": "b"}]}, ["a", "b"]) == {"b"}
    assert batch_failures({"batchItemFailures": [{"itemIdentifier": "c"}]}, ["a", "b"]) is None


def test_event_shape_matches_the_canonical_sqs_event(aws: Any) -> None:
    canonical = json.loads((EVENTS / "sqs_event.json").read_text())["Records"][0]
    queue, _ = _queues(aws)
    aws.sqs.send_message(
        QueueUrl=queue,
        MessageBody="hello",
        MessageAttributes={"trace": {"DataType": "String", "StringValue": "abc"}},
    )
    handler = Recorder()
    _esm(aws, queue, handler).poll_once(wait_seconds=0)
    record = handler.events[0]["Records"][0]
    assert set(record) == set(canonical)
    assert set(record["attributes"]) == set(canonical["attributes"])
    assert record["messageAttributes"] == canonical["messageAttributes"]
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(":esm-test")
    assert record["awsRegion"] == "us-east-1"
    assert record["body"] == "hello"
    assert record["md5OfBody"] == "5d41402abc4b2a76b9719d911017c592"  # md5("hello")
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert int(record["attributes"]["ApproximateFirstReceiveTimestamp"]) >= int(record["attributes"]["SentTimestamp"])


def test_event_without_message_attributes_has_no_attributes_md5(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 1)
    handler = Recorder()
    _esm(aws, queue, handler).poll_once(wait_seconds=0)
    record = handler.events[0]["Records"][0]
    assert record["messageAttributes"] == {}
    assert "md5OfMessageAttributes" not in record


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_p_man_4_context_remaining_time_counts_down_from_the_lambda_timeout(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 1)
    clock = FakeMonotonic()
    seen: list[int] = []

    def answer(event: dict[str, Any], context: LambdaContext) -> None:
        seen.append(context.get_remaining_time_in_millis())
        clock.now += 12.5
        seen.append(context.get_remaining_time_in_millis())
        clock.now += 100
        seen.append(context.get_remaining_time_in_millis())

    handler = Recorder(answer)
    esm = EventSourceMapping(
        EsmConfig(function_name="asya-demo-analyze", queue_url=queue, lambda_timeout=310, memory_mb=256),
        handler,
        sqs=aws.sqs,
        monotonic=clock,
    )
    esm.poll_once(wait_seconds=0)
    assert seen == [310_000, 297_500, 197_500]
    context = handler.contexts[0]
    assert context.function_name == "asya-demo-analyze"
    assert context.function_version == "$LATEST"
    assert context.invoked_function_arn == "arn:aws:lambda:us-east-1:123456789012:function:asya-demo-analyze"
    assert context.memory_limit_in_mb == 256
    assert context.log_group_name == "/aws/lambda/asya-demo-analyze"
    assert "[$LATEST]" in context.log_stream_name
    assert len(context.aws_request_id) == 36


def test_p_ack_5_invocation_past_the_lambda_timeout_is_a_crash(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 1)
    clock = FakeMonotonic()

    def slow(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        clock.now += 71
        return {"batchItemFailures": []}

    esm = EventSourceMapping(
        EsmConfig(function_name="fn", queue_url=queue, lambda_timeout=70), slow, sqs=aws.sqs, monotonic=clock
    )
    esm.poll_once(wait_seconds=0)
    assert esm.stats.crashes == 1
    assert esm.stats.deleted == 0
    assert _counts(aws, queue) == (0, 1)


def test_worker_threads_process_the_queue_and_stop_cleanly(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 5)
    done = threading.Event()
    lock = threading.Lock()
    names: set[str] = set()

    def answer(event: dict[str, Any], context: LambdaContext) -> None:
        with lock:
            names.add(threading.current_thread().name)
        if esm.stats.records >= 5:
            done.set()

    esm = _esm(aws, queue, answer, batch_size=2, max_concurrency=2)
    esm.start()
    try:
        assert done.wait(20)
    finally:
        esm.stop(timeout=10)
    assert not esm.running
    assert esm.stats.records == 5
    assert names <= {"esm-asya-test-fn-0", "esm-asya-test-fn-1"}
    assert _counts(aws, queue) == (0, 0)  # stop() waited for the last deletes
