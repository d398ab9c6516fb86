"""One SQS batch, for the actor runtime (``asya.sidecar``) and the crew (``asya_crew.runtime``): the Powertools
``BatchProcessor`` subclass :class:`RecordBatch` and the batch-level rules it applies.

- Records run one at a time in batch order, or, for an actor with ``record_concurrency`` N over 1 (async handlers
  only), as tasks of the handler's event loop, at most N at once, started in batch order as slots free up (P-PROC-1).
- Start rule (P-TIME-6): the first record of a batch always starts; a later one starts only while the Lambda's
  remaining time, minus the 5 s safety margin, still covers the record's budget (the actor's call limit; 0 for crew),
  judged at the moment it would start. Once one record does not fit, it and every later record fail unstarted and
  are made visible again at once.
- Return time of failed records (P-ACK-4): unstarted ones at once, others after
  ``min(queue visibility timeout, 5 * 2^(n-1))`` seconds, ``n`` = ``ApproximateReceiveCount``.
- Each failed record is logged once at WARNING, ``record failed: SQS delivers it again`` with ``message_id``,
  ``error_type`` and ``error`` and no traceback (:func:`log_failed_record`): Powertools reports record failures at
  DEBUG only.

The only AWS calls here are the visibility changes of failed records, through the runtime's transport.
"""

from __future__ import annotations

import contextvars
import inspect
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya.batchmetrics import record_failed_records
from asya.exceptions import AsyaError, HopHeldError
from asya.timeout import SAFETY_MARGIN_SECONDS

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "RECORD_FAILED",
    "BatchSteps",
    "RecordBatch",
    "StartRule",
    "UnstartedRecordError",
    "failed_visibilities",
    "log_failed_record",
]

#: SQS's longest visibility timeout (12 hours).
_MAX_VISIBILITY: Final = 43_200

RECORD_FAILED = "record failed: SQS delivers it again"

_MAX_BACKOFF_EXPONENT = 20


class UnstartedRecordError(AsyaError):
    """The record was not started under the start rule (P-TIME-6); SQS delivers it again."""


class StartRule:
    """P-TIME-6 for one batch: call :meth:`admit` before each record; it records the unstarted receipt handles."""

    __slots__ = ("_context", "_out_of_time", "started", "unstarted")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._out_of_time = False
        self.started = 0
        self.unstarted: list[str] = []

    def admit(self, *, message_id: str, receipt_handle: str, budget_seconds: float = 0.0) -> None:
        """Count the record as started, or raise :class:`UnstartedRecordError` (remembering its handle)."""
        if self.started and (self._out_of_time or not self._fits(budget_seconds)):
            self._out_of_time = True
            self.unstarted.append(receipt_handle)
            raise UnstartedRecordError(f"record {message_id} not started: not enough Lambda time left")
        self.started += 1

    def start_unchecked(self) -> None:
        """Count a record that starts whatever time is left: a body that did not parse costs one x-sump send."""
        self.started += 1

    def _fits(self, budget_seconds: float) -> bool:
        remaining = getattr(self._context, "get_remaining_time_in_millis", None)
        if remaining is None:
            return True
        return bool(remaining() / 1000 - SAFETY_MARGIN_SECONDS >= max(0.0, budget_seconds))


def failed_visibilities(
    records: Iterable[Mapping[str, Any]],
    *,
    failed: Collection[str],
    unstarted: Collection[str],
    visibility_timeout: Callable[[], int],
    held: Mapping[str, int] | None = None,
) -> list[tuple[str, int]]:
    """``(receipt handle, seconds until visible)`` of each failed record (P-TIME-6, P-ACK-4); ``visibility_timeout``
    is asked only when a started record failed. A record whose hop another run holds comes back when that run's lease
    ends (``held``: message id -> seconds, P-ACK-8; at most SQS's 12 hours)."""
    entries: list[tuple[str, int]] = []
    for record in records:
        message_id = record["messageId"]
        if message_id not in failed:
            continue
        handle = record["receiptHandle"]
        if handle in unstarted:
            entries.append((handle, 0))
            continue
        if held and message_id in held:
            # the lease's end, not capped by the queue's visibility timeout: a shorter return would bounce the copy
            # off the live claim again and again, each time a receive closer to the DLQ
            entries.append((handle, min(_MAX_VISIBILITY, max(held[message_id], 1))))
            continue
        receives = int(record.get("attributes", {}).get("ApproximateReceiveCount") or 1)
        delay = 5 * 2 ** min(max(receives - 1, 0), _MAX_BACKOFF_EXPONENT)
        entries.append((handle, min(visibility_timeout(), delay)))
    return entries


class _Warns(Protocol):
    def warning(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...


def log_failed_record(logger: _Warns, message_id: str, error: BaseException | None) -> None:
    """One WARNING line naming the failed record and why (P-ACK-3)."""
    fields: dict[str, Any] = {"message_id": message_id}
    if error is not None:
        kind = type(error)
        fields.update(error_type=f"{kind.__module__}.{kind.__qualname__}", error=str(error))
    logger.warning(RECORD_FAILED, extra=fields)


class BatchSteps(Protocol):
    """What a runtime plugs into :class:`RecordBatch`: the batch's preparation, one record, and the ends."""

    def begin(self, batch: RecordBatch) -> Callable[[SQSRecord], object]:
        """Parse and pre-flight the batch's records (``batch.records``, ``batch.start``); the record handler."""

    def failed(self, message_id: str, error: BaseException) -> None:
        """A record failed while it ran (a held hop included): release what it holds."""

    def finish(self) -> list[tuple[str, BaseException | None]]:
        """After the last record: the records that failed since they ended (the outbox's late frames), in order."""

    def late_failed(self, message_id: str) -> None:
        """A record of :meth:`finish` is failed: release what it holds."""

    def end(self) -> None:
        """After the response is known and the backoff applied (the run history's flush); never raises."""


class RecordBatch(BatchProcessor):
    """One SQS batch through Powertools (``EventType.SQS``, partial batch response, P-ACK-1), for the actor runtime
    and the crew alike. The response is built here, never edited after the fact:

    - ``_prepare``: the start rule (P-TIME-6) and the runtime's :meth:`BatchSteps.begin` (parse, pre-flight);
    - each record in its own copy of the current ``contextvars`` context: its log keys (``asya.logkeys``) and trace
      header (``asya.xray``) end with it, and concurrent records (asyncio tasks of one loop, each started with its
      own copy, :meth:`_async_process_record` awaiting a coroutine record handler) never see each other's;
    - ``failure_handler``: one WARNING line per failed record (P-ACK-3), the held hop's return time (P-ACK-8) and the
      runtime's release;
    - ``_clean``: the records that failed after they ended (:meth:`BatchSteps.finish`), the return time of every
      failed record (P-ACK-4, :func:`failed_visibilities`, best effort), then :meth:`BatchSteps.end`.
    """

    def __init__(
        self,
        steps: BatchSteps,
        *,
        actor: str,
        transport: _Visibility,
        logger: Any,
        metrics_namespace: str | None = None,
    ) -> None:
        """``metrics_namespace``: the mesh's namespace, for the ``FailedRecords`` metric (``asya.batchmetrics``) of
        a batch that hands records back; ``None``: no metric."""
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self._steps = steps
        self._metrics_namespace = metrics_namespace
        self._actor = actor
        self._transport = transport
        self._log = logger
        self.start = StartRule(None)
        self.held: dict[str, int] = {}  # message id -> seconds until another run's lease ends (P-ACK-8)
        self.concurrency = 1  # records running at once (P-PROC-1), set by run() before BatchSteps.begin

    def run(
        self,
        event: Mapping[str, Any],
        context: Any,
        *,
        concurrency: int = 1,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> dict[str, Any]:
        """Process one SQS event; ``{"batchItemFailures": [...]}``. Records run one at a time in batch order, or,
        with ``concurrency`` over 1 and a ``loop`` (an async handler's own, not running), as tasks of that loop, at
        most ``concurrency`` at once, started in batch order (P-PROC-1)."""
        self.lambda_context = context
        self.records = list(event.get("Records") or [])
        self.concurrency = concurrency if loop is not None else 1
        with self:
            if loop is not None and self.concurrency > 1:
                loop.run_until_complete(self._run_bounded(self.concurrency))
            else:
                self.process()
        failures = [{"itemIdentifier": f["itemIdentifier"]} for f in self.response()["batchItemFailures"]]
        if self._metrics_namespace is not None:
            record_failed_records(self._metrics_namespace, len(failures))
        return {"batchItemFailures": failures}

    def _prepare(self) -> None:
        super()._prepare()  # type: ignore[no-untyped-call]
        self.start = StartRule(self.lambda_context)
        self.held = {}
        self.handler = self._steps.begin(self)
        self._handler_accepts_lambda_context = False

    def _process_record(self, record: dict[str, Any]) -> Any:
        return contextvars.copy_context().run(super()._process_record, record)

    async def _run_bounded(self, limit: int) -> None:
        """Every record as a task, at most ``limit`` running: the next starts when one ends. Tasks start in batch
        order and each runs its steps before the handler's first await without a pause, so the start rule
        (P-TIME-6), the pre-flight and the hop claim of the records are taken in batch order."""
        import asyncio  # only actors with concurrent records pay for the import (cold start)

        running: set[asyncio.Task[Any]] = set()
        try:
            for record in self.records:
                if len(running) >= limit:
                    done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        task.result()  # a record's failure is answered already; only a crash is raised (P-ACK-5)
                running.add(asyncio.create_task(self._async_process_record(record)))
            while running:
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
        except BaseException:
            # a crash ends the invocation: no record task may live on into the loop's next invocation
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)
            raise

    async def _async_process_record(self, record: dict[str, Any]) -> Any:
        # an asyncio task runs in its own copy of the context already
        data = SQSRecord(record)
        try:
            result = self.handler(data)
            if inspect.isawaitable(result):
                result = await result
            return self.success_handler(record=record, result=result)
        except Exception:
            return self.failure_handler(record=data, exception=sys.exc_info())

    def failure_handler(self, record: SQSRecord, exception: Any) -> Any:
        error = exception[1]
        if isinstance(error, HopHeldError):
            self.held[record.message_id] = error.remaining_seconds
            self._log.info("hop held by another run: record comes back when its lease ends")
        else:
            log_failed_record(self._log, record.message_id, error)
        self._steps.failed(record.message_id, error)
        return super().failure_handler(record, exception)

    def _clean(self) -> None:
        super()._clean()  # type: ignore[no-untyped-call]
        failures = self.batch_response["batchItemFailures"]
        failed = {str(f["itemIdentifier"]) for f in failures}
        for message_id, error in self._steps.finish():  # frames that failed after their record ended (P-ACK-2)
            if message_id not in failed:
                failed.add(message_id)
                failures.append({"itemIdentifier": message_id})
                log_failed_record(self._log, message_id, error)
                self._steps.late_failed(message_id)
        if failed:
            self._back_off(failed)
        self._steps.end()

    def _back_off(self, failed: set[str]) -> None:
        """Failed records come back at once when unstarted, when another run's lease ends when held, else after a
        growing delay. Best effort: the records fail either way; only their return time is lost."""
        try:
            entries = failed_visibilities(
                self.records,
                failed=failed,
                unstarted=set(self.start.unstarted),
                visibility_timeout=lambda: self._transport.visibility_timeout(self._actor),
                held=self.held,
            )
            self._transport.change_visibilities(self._actor, entries)
        except Exception as exc:
            self._log.warning("could not change the visibility of failed records", extra={"error": str(exc)})


class _Visibility(Protocol):
    def visibility_timeout(self, actor: str) -> int: ...

    def change_visibilities(self, actor: str, entries: Sequence[tuple[str, int]]) -> None: ...
