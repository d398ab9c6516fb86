"""The event source mapping emulator against moto SQS (P-ACK-1, P-ACK-4..7, P-MAN-4): batching, concurrent pollers,
visibility, crashes, delays and redrive.

Where a visibility timeout or a delay must end, the test skips moto's SQS clock past it (``sqs_clock``) and the
timeout is long (:data:`VISIBILITY`), so "still hidden" and "visible again" do not depend on how fast the machine is.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from asya_local.esm import EsmConfig, EventSourceMapping, batch_failures
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from tests.clocks import SqsClock

pytestmark = pytest.mark.functional

EVENTS = Path(__file__).resolve().parent.parent / "events"
#: A visibility timeout no test run comes near in real time: it ends only when a test skips the SQS clock past it.
VISIBILITY = 300


@pytest.fixture
def sqs_clock(aws: Any, monkeypatch: pytest.MonkeyPatch) -> SqsClock:
    return SqsClock().install(monkeypatch)


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


def test_p_ack_1_failed_record_is_redelivered_after_the_visibility_timeout(aws: Any, sqs_clock: SqsClock) -> None:
    queue, _ = _queues(aws, visibility=VISIBILITY)
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
    sqs_clock.advance(VISIBILITY)
    assert esm.poll_once(wait_seconds=0) == 1  # visible again once the visibility timeout has passed
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


def test_p_ack_5_crash_deletes_nothing_then_p_ack_6_redrive_to_the_dlq(aws: Any, sqs_clock: SqsClock) -> None:
    queue, dlq = _queues(aws, visibility=VISIBILITY, max_receive_count=2)
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
    assert esm.poll_once(wait_seconds=0) == 0  # hidden until the visibility timeout ends
    sqs_clock.advance(VISIBILITY)
    assert esm.poll_once(wait_seconds=0) == 2  # redelivered after the visibility timeout
    assert (esm.stats.crashes, esm.stats.deleted) == (2, 0)
    sqs_clock.advance(VISIBILITY)
    # the third receive finds both over maxReceiveCount: SQS moves them to the DLQ and returns nothing
    assert esm.poll_once(wait_seconds=0) == 0
    assert calls == 2
    assert _counts(aws, queue) == (0, 0)
    assert _counts(aws, dlq) == (2, 0)
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


def test_p_ack_5_crash_in_a_worker_keeps_it_polling_and_the_record_comes_back(aws: Any) -> None:
    """A ``BaseException`` escaping the handler (here ``SystemExit``) is a crash: no batch response, nothing deleted,
    the record visible again after the visibility timeout, and the worker thread goes on polling."""
    queue, _ = _queues(aws, visibility=1)
    (message_id,) = _send(aws, queue, 1)
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def answer(event: dict[str, Any], context: LambdaContext) -> None:
        record = event["Records"][0]
        seen.append((record["messageId"], record["attributes"]["ApproximateReceiveCount"]))
        if len(seen) == 1:
            raise SystemExit("the runtime process died")
        done.set()

    esm = _esm(aws, queue, answer)
    esm.start()
    try:
        assert done.wait(20)
        assert esm.running
    finally:
        esm.stop(timeout=10)
    assert seen == [(message_id, "1"), (message_id, "2")]
    assert esm.stats.crashes == 1
    assert esm.stats.deleted == 1
    assert _counts(aws, queue) == (0, 0)


def test_p_ack_7_visibility_expiry_during_a_call_delivers_the_message_again_to_another_worker(
    aws: Any, sqs_clock: SqsClock
) -> None:
    """Concurrent pollers (``max_concurrency``): while the first call still runs past the visibility timeout,
    another worker receives the same message with ``ApproximateReceiveCount`` 2, a duplicate delivery. The second
    receive's timeout then outlasts the test, so no third delivery can come before the deletes."""
    queue, _ = _queues(aws, visibility=VISIBILITY)
    (message_id,) = _send(aws, queue, 1)
    second_arrived = threading.Event()
    calls: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def answer(event: dict[str, Any], context: LambdaContext) -> None:
        record = event["Records"][0]
        with lock:
            calls.append((record["messageId"], record["attributes"]["ApproximateReceiveCount"], _thread_name()))
            first = len(calls) == 1
        if first:
            sqs_clock.advance(VISIBILITY)  # this call outlives the message's visibility timeout
            second_arrived.wait(20)  # still running when the message is received again
        else:
            second_arrived.set()

    esm = _esm(aws, queue, answer, max_concurrency=2)
    esm.start()
    try:
        assert second_arrived.wait(20)
    finally:
        esm.stop(timeout=25)
    assert [(mid, count) for mid, count, _ in calls] == [(message_id, "1"), (message_id, "2")]
    assert calls[0][2] != calls[1][2], "the duplicate goes to another worker"
    assert _counts(aws, queue) == (0, 0)


def _thread_name() -> str:
    return threading.current_thread().name


def test_delayed_message_is_received_only_after_its_delay(aws: Any, sqs_clock: SqsClock) -> None:
    """``DelaySeconds`` (used for retries, P-RES-8) is honoured by SQS (moto): hidden first, delivered after."""
    delay = 120
    queue, _ = _queues(aws)
    aws.sqs.send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=delay)
    delayed = aws.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    handler = Recorder()
    esm = _esm(aws, queue, handler)
    assert esm.poll_once(wait_seconds=0) == 0
    sqs_clock.advance(delay)
    assert esm.poll_once(wait_seconds=0) == 1
    attributes = handler.events[0]["Records"][0]["attributes"]
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) - int(attributes["SentTimestamp"]) >= delay * 1000


def _send_one_more_after_first_receive(aws: Any, queue: str) -> None:
    """After the first ``ReceiveMessage`` returns, one more message arrives on the queue."""
    sent = False

    def after_receive(**_: Any) -> None:
        nonlocal sent
        if not sent:
            sent = True
            aws.sqs.send_message(QueueUrl=queue, MessageBody="straggler")

    aws.sqs.meta.events.register("after-call.sqs.ReceiveMessage", after_receive)


@pytest.mark.parametrize(("window", "expected"), [(0.0, 3), (2.0, 4)])
def test_batching_window_gathers_messages_that_arrive_within_it(aws: Any, window: float, expected: int) -> None:
    """``MaximumBatchingWindowInSeconds``: 0 (Lambda's SQS default) invokes with what one receive got; a window keeps
    receiving until the batch is full or the window ends."""
    queue, _ = _queues(aws)
    _send(aws, queue, 3)
    _send_one_more_after_first_receive(aws, queue)
    handler = Recorder()
    esm = _esm(aws, queue, handler, batch_size=5, batching_window_seconds=window)
    assert esm.poll_once(wait_seconds=0) == expected
    assert len(handler.events[0]["Records"]) == expected


def test_batching_window_stops_gathering_when_the_batch_is_full(aws: Any) -> None:
    queue, _ = _queues(aws)
    _send(aws, queue, 12)
    handler = Recorder()
    esm = _esm(aws, queue, handler, batch_size=11, batching_window_seconds=60)
    assert esm.poll_once(wait_seconds=0) == 11  # a 60 s window, yet the full batch leaves at once
    assert esm.stats.deleted == 11


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"batch_size": 11}, "batch_size must be 1..10 \\(above 10 needs a batching window of at least 1 s\\)"),
        ({"batch_size": 10001, "batching_window_seconds": 1}, "batch_size must be 1..10000"),
        ({"batching_window_seconds": 301}, "batching_window_seconds must be 0..300"),
    ],
)
def test_esm_config_rejects_lambda_incompatible_batching(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(LocalModeError, match=message):
        EsmConfig(function_name="fn", queue_url="http://q", **settings)


def test_each_worker_gets_its_own_execution_environment(aws: Any) -> None:
    """``new_handler``: one handler per concurrent invocation, as Lambda runs them in separate containers."""
    queue, _ = _queues(aws)
    built: list[Recorder] = []

    def new_handler() -> Recorder:
        built.append(Recorder())
        return built[-1]

    first = Recorder()
    esm = EventSourceMapping(
        EsmConfig(function_name="fn", queue_url=queue, max_concurrency=3), first, sqs=aws.sqs, new_handler=new_handler
    )
    esm.start()
    esm.stop(timeout=10)
    assert len(built) == 2  # worker 0 uses the given handler, the other two get their own


def test_p_trace_3_a_records_attributes_carry_the_messages_aws_trace_header(aws: Any) -> None:
    queue, _ = _queues(aws)
    trace = "Root=1-67a1b2c3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"
    aws.sqs.send_message(
        QueueUrl=queue,
        MessageBody="traced",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
    )
    aws.sqs.send_message(QueueUrl=queue, MessageBody="untraced")
    recorder = Recorder()
    esm = _esm(aws, queue, recorder, batch_size=10)
    while esm.poll_once(wait_seconds=0):
        pass
    records = {r["body"]: r["attributes"] for e in recorder.events for r in e["Records"]}
    assert records["traced"]["AWSTraceHeader"] == trace
    assert "AWSTraceHeader" not in records["untraced"]
