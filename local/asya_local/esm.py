"""An emulator of Lambda's SQS event source mapping (with ``ReportBatchItemFailures``), one per actor.

Each of ``max_concurrency`` worker threads long-polls the actor's queue (``ReceiveMessage`` with
``MaxNumberOfMessages`` up to ``batch_size``, ``WaitTimeSeconds=wait_seconds``, every system and message attribute),
builds the SQS event and a :class:`~asya_local.lambda_event.LambdaContext` whose remaining time counts down from the
function's timeout, and calls the handler in-process. Workers are concurrent invocations: while one runs, the others
keep polling, so a message whose visibility timeout expires during a long call is received again by another worker,
with a higher ``ApproximateReceiveCount``, exactly as Lambda's pollers do (a duplicate delivery, P-ACK-7). With
``new_handler`` every worker gets its own handler (one execution environment per concurrent invocation, as Lambda
runs them in separate containers); otherwise the workers share ``handler``.

Batching: without a window (``batching_window_seconds = 0``, Lambda's default for SQS) an invocation gets what one
receive returned, up to ``batch_size`` (at most 10). With a window, the worker keeps receiving after the first
message until ``batch_size`` records (up to 10000, Lambda's limit with a window) are gathered or the window ends; the
gathered messages' visibility timeouts run meanwhile, as in AWS. Then, like Lambda (P-ACK-1, P-ACK-5):

- the records not listed in ``batchItemFailures`` are deleted (``DeleteMessageBatch``); the listed ones are left alone
  and become visible again when their visibility timeout ends (including any ``ChangeMessageVisibility`` the handler
  made, P-ACK-4);
- a response of ``None``, ``{}``, or a ``batchItemFailures`` that is ``null`` or empty means every record succeeded;
- a response Lambda cannot accept fails the whole batch (nothing deleted): not JSON-serialisable, not an object,
  ``batchItemFailures`` not a list, an entry that is not an object, or an ``itemIdentifier`` that is missing, empty,
  not a string or not a message id of the batch;
- an invocation that raises (any ``BaseException`` but ``KeyboardInterrupt``, ``SystemExit`` included) or runs past
  the function's timeout is a crash: nothing is deleted, every record of the batch becomes visible again when its
  visibility timeout ends, and the worker goes on polling (Lambda replaces a crashed environment).

SQS itself does the rest, and moto 5.2.5 does it as AWS does: redrive to the DLQ after ``maxReceiveCount`` receives
(P-ACK-6; the message moves on the first receive after its count reached the limit, so the emulator never moves
messages), ``DelaySeconds`` (a delayed message is neither visible nor received before its delay ends) and visibility
timeouts (per receive, changed by ``ChangeMessageVisibility``).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext, function_arn, sqs_event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

__all__ = ["EsmConfig", "EsmStats", "EventSourceMapping", "Handler", "batch_failures"]

_log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], LambdaContext], Any]

#: Pause after a failed ReceiveMessage before polling again.
_RECEIVE_ERROR_BACKOFF: Final = 1.0


@dataclass(frozen=True, slots=True)
class EsmConfig:
    """One event source mapping: the function it invokes and the queue it polls."""

    function_name: str
    queue_url: str
    batch_size: int = 1
    max_concurrency: int = 1
    #: The Lambda timeout in seconds (P-MAN-4): the context's budget, and the limit past which a call is a crash.
    lambda_timeout: float = 70.0
    memory_mb: int = 512
    wait_seconds: int = 1
    region: str = "us-east-1"
    #: ``MaximumBatchingWindowInSeconds``: 0..300, 0 (Lambda's default for SQS) invokes with what one receive got.
    batching_window_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.batching_window_seconds <= 300:
            raise LocalModeError(
                f"{self.function_name}: batching_window_seconds must be 0..300, got {self.batching_window_seconds!r}"
            )
        limit = 10 if self.batching_window_seconds < 1 else 10000
        if not 1 <= self.batch_size <= limit:
            raise LocalModeError(
                f"{self.function_name}: batch_size must be 1..{limit}"
                f"{' (above 10 needs a batching window of at least 1 s)' if limit == 10 else ''}, "
                f"got {self.batch_size!r}"
            )
        if self.max_concurrency < 1:
            raise LocalModeError(f"{self.function_name}: max_concurrency must be >= 1, got {self.max_concurrency!r}")
        if not 0 <= self.wait_seconds <= 20:
            raise LocalModeError(f"{self.function_name}: wait_seconds must be 0..20, got {self.wait_seconds!r}")
        if self.lambda_timeout <= 0:
            raise LocalModeError(f"{self.function_name}: lambda_timeout must be > 0, got {self.lambda_timeout!r}")


@dataclass(frozen=True, slots=True)
class EsmStats:
    """Counters since start: invocations, records delivered, records failed (listed, invalid answer or crash),
    crashed invocations, records deleted, and failed SQS calls."""

    invocations: int = 0
    records: int = 0
    failures: int = 0
    crashes: int = 0
    deleted: int = 0
    sqs_errors: int = 0


def batch_failures(response: object, message_ids: Sequence[str]) -> set[str] | None:
    """The message ids a handler response reports as failed, or ``None`` when Lambda would reject the response (the
    whole batch fails)."""
    try:
        json.dumps(response)
    except (TypeError, ValueError):
        return None
    if response is None:
        return set()
    if not isinstance(response, dict):
        return None
    items = response.get("batchItemFailures")
    if items is None:
        return set()
    if not isinstance(items, list):
        return None
    known = set(message_ids)
    failed: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            return None
        identifier = item.get("itemIdentifier")
        if not isinstance(identifier, str) or identifier not in known:
            return None
        failed.add(identifier)
    return failed


class EventSourceMapping:
    """Polls one queue and invokes ``handler`` like Lambda's SQS event source mapping. ``start``/``stop`` run the
    worker threads; ``poll_once`` runs one receive-invoke-delete cycle in the calling thread."""

    def __init__(
        self,
        config: EsmConfig,
        handler: Handler,
        *,
        sqs: SQSClient,
        monotonic: Callable[[], float] = time.monotonic,
        new_handler: Callable[[], Handler] | None = None,
    ) -> None:
        self.config = config
        self._handler = handler
        self._new_handler = new_handler
        self._sqs = sqs
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stats = EsmStats()
        self._queue_arn: str | None = None

    @property
    def stats(self) -> EsmStats:
        with self._lock:
            return self._stats

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def start(self) -> None:
        if self._threads:
            raise LocalModeError(f"{self.config.function_name}: event source mapping already started")
        self._resolve_queue_arn()
        self._stop.clear()
        for index in range(self.config.max_concurrency):
            handler = self._handler if index == 0 or self._new_handler is None else self._new_handler()
            thread = threading.Thread(
                target=self._run, args=(handler,), name=f"esm-{self.config.function_name}-{index}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def request_stop(self) -> None:
        """Ask the workers to stop after their current poll or invocation, without waiting."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop polling and wait for the workers to finish their current invocation."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = [thread for thread in self._threads if thread.is_alive()]
        if self._threads:
            raise LocalModeError(f"{self.config.function_name}: workers still running after {timeout} s")

    def poll_once(self, *, wait_seconds: int | None = None) -> int:
        """Receive one batch and process it. Returns the number of records received."""
        messages = self._gather(self.config.wait_seconds if wait_seconds is None else wait_seconds)
        if messages:
            self._invoke(self._handler, messages, log_stream=_log_stream_name())
        return len(messages)

    def _run(self, handler: Handler) -> None:
        log_stream = _log_stream_name()  # one "execution environment" per worker
        while not self._stop.is_set():
            try:
                messages = self._gather(self.config.wait_seconds)
            except (BotoCoreError, ClientError) as exc:
                if self._stop.is_set():
                    return
                self._count(sqs_errors=1)
                _log.warning("%s: ReceiveMessage failed: %s", self.config.function_name, exc)
                self._stop.wait(_RECEIVE_ERROR_BACKOFF)
                continue
            if messages:
                self._invoke(handler, messages, log_stream=log_stream)

    def _resolve_queue_arn(self) -> str:
        if self._queue_arn is None:
            attributes = self._sqs.get_queue_attributes(QueueUrl=self.config.queue_url, AttributeNames=["QueueArn"])
            self._queue_arn = attributes["Attributes"]["QueueArn"]
        return self._queue_arn

    def _gather(self, wait_seconds: int) -> list[MessageTypeDef]:
        """One batch: a first receive, then, within the batching window, more until the batch is full."""
        size = self.config.batch_size
        messages = self._receive(wait_seconds, size)
        window = self.config.batching_window_seconds
        if not messages or window <= 0:
            return messages
        closes = self._monotonic() + window
        while len(messages) < size and not self._stop.is_set():
            left = closes - self._monotonic()
            if left <= 0:
                break
            more = self._receive(min(20, int(left)), size - len(messages))
            if not more and left < 1:
                self._stop.wait(min(left, 0.1))  # under a second left: poll briefly instead of long-polling
            messages.extend(more)
        return messages

    def _receive(self, wait_seconds: int, count: int) -> list[MessageTypeDef]:
        response = self._sqs.receive_message(
            QueueUrl=self.config.queue_url,
            MaxNumberOfMessages=min(10, count),
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _invoke(self, handler: Handler, messages: list[MessageTypeDef], *, log_stream: str) -> None:
        queue_arn = self._resolve_queue_arn()
        region = self.config.region
        account_id = queue_arn.split(":")[4]
        event = sqs_event(messages, queue_arn=queue_arn, region=region)
        context = LambdaContext(
            function_name=self.config.function_name,
            invoked_function_arn=function_arn(self.config.function_name, region=region, account_id=account_id),
            memory_limit_in_mb=self.config.memory_mb,
            timeout_seconds=self.config.lambda_timeout,
            log_stream_name=log_stream,
            monotonic=self._monotonic,
        )
        ids = [message["MessageId"] for message in messages]
        self._count(invocations=1, records=len(messages))
        started = self._monotonic()
        try:
            response = handler(event, context)
        except KeyboardInterrupt:
            raise
        except BaseException:
            _log.exception("%s: invocation %s crashed", self.config.function_name, context.aws_request_id)
            self._count(crashes=1, failures=len(messages))
            return
        if self._monotonic() - started > self.config.lambda_timeout:
            _log.error(
                "%s: invocation %s ran past the %s s timeout",
                self.config.function_name,
                context.aws_request_id,
                self.config.lambda_timeout,
            )
            self._count(crashes=1, failures=len(messages))
            return
        failed = batch_failures(response, ids)
        if failed is None:
            _log.error("%s: invalid batch response %r: the whole batch fails", self.config.function_name, response)
            self._count(failures=len(messages))
            return
        self._count(failures=len(failed))
        self._delete([message for message in messages if message["MessageId"] not in failed])

    def _delete(self, messages: list[MessageTypeDef]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            try:
                response = self._sqs.delete_message_batch(
                    QueueUrl=self.config.queue_url,
                    Entries=[
                        {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                        for index, message in enumerate(chunk)
                    ],
                )
            except (BotoCoreError, ClientError) as exc:
                # The records stay in the queue and are delivered again: at least once (P-ACK-7).
                _log.warning("%s: DeleteMessageBatch failed: %s", self.config.function_name, exc)
                self._count(sqs_errors=1)
                continue
            errors = response.get("Failed", [])
            for error in errors:
                _log.warning("%s: could not delete a record: %s", self.config.function_name, error.get("Code"))
            self._count(deleted=len(response.get("Successful", [])), sqs_errors=len(errors))

    def _count(self, **increments: int) -> None:
        with self._lock:
            current = self._stats
            self._stats = EsmStats(
                **{f.name: getattr(current, f.name) + increments.get(f.name, 0) for f in fields(EsmStats)}
            )


def _log_stream_name() -> str:
    return f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{secrets.token_hex(16)}"
