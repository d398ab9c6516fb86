"""``asya.batch.RecordBatch``, the one Powertools batch processor of the layer and the crew: records run in their own
``contextvars`` context (log keys end with the record, P-TRACE-4), failures are answered and logged once (P-ACK-1,
P-ACK-3), and the async path runs coroutine records concurrently with the same isolation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import logkeys
from asya.batch import RECORD_FAILED, RecordBatch

pytestmark = pytest.mark.unit


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Visibility:
    def __init__(self) -> None:
        self.changes: list[tuple[str, int]] = []

    def visibility_timeout(self, actor: str) -> int:
        return 60

    def change_visibilities(self, actor: str, entries: Sequence[tuple[str, int]]) -> None:
        self.changes.extend(entries)


class Steps:
    def __init__(self, handler: Callable[[SQSRecord], Any], late: list[tuple[str, BaseException | None]]) -> None:
        self.handler = handler
        self.late = late
        self.failed_ids: list[str] = []
        self.ended = False

    def begin(self, batch: RecordBatch) -> Callable[[SQSRecord], Any]:
        return self.handler

    def failed(self, message_id: str, error: BaseException) -> None:
        self.failed_ids.append(message_id)

    def finish(self) -> list[tuple[str, BaseException | None]]:
        return self.late

    def late_failed(self, message_id: str) -> None:
        self.failed_ids.append(message_id)

    def end(self) -> None:
        self.ended = True


def _event(*ids: str) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": i, "receiptHandle": f"h-{i}", "body": i, "attributes": {"ApproximateReceiveCount": "1"}}
            for i in ids
        ]
    }


def _logger(name: str) -> tuple[logging.Logger, Lines]:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    lines = Lines()
    logger.addHandler(lines)
    logkeys.install(logger)
    return logger, lines


def test_p_trace_4_record_keys_end_with_the_record_and_failures_are_answered_once() -> None:
    logger, lines = _logger("test.record-batch.sync")

    def handle(record: SQSRecord) -> None:
        logkeys.update(correlation_id=record.body)
        logger.info("in record")
        if record.body == "bad":
            raise ValueError("bad body")

    steps = Steps(handle, late=[("late", RuntimeError("frame failed")), ("bad", None)])
    visibility = Visibility()
    batch = RecordBatch(steps, actor="a", transport=visibility, logger=logger)
    response = batch.run(_event("good", "bad", "late"), None)
    logger.info("after the batch")
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}, {"itemIdentifier": "late"}]}
    assert [r.__dict__.get("correlation_id") for r in lines.records if r.getMessage() == "in record"] == [
        "good",
        "bad",
        "late",
    ]
    failures = [r for r in lines.records if r.getMessage() == RECORD_FAILED]
    assert [(r.__dict__["message_id"], r.__dict__.get("correlation_id")) for r in failures] == [
        ("bad", "bad"),
        ("late", None),
    ]
    [after] = [r for r in lines.records if r.getMessage() == "after the batch"]
    assert "correlation_id" not in after.__dict__
    assert steps.failed_ids == ["bad", "late"] and steps.ended
    assert visibility.changes == [("h-bad", 5), ("h-late", 5)]


def test_async_path_runs_coroutine_records_concurrently_each_with_its_own_keys() -> None:
    logger, lines = _logger("test.record-batch.async")
    both_started = asyncio.Event()
    started: list[str] = []

    async def handle(record: SQSRecord) -> None:
        logkeys.update(correlation_id=record.body)
        started.append(record.body)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()  # neither ends before both began: they overlap
        logger.info("in record")
        if record.body == "r2":
            raise ValueError("bad body")

    steps = Steps(handle, late=[])
    batch = RecordBatch(steps, actor="a", transport=Visibility(), logger=logger)
    loop = asyncio.new_event_loop()
    try:
        response = batch.run(_event("r1", "r2"), None, concurrency=2, loop=loop)
    finally:
        loop.close()
    assert response == {"batchItemFailures": [{"itemIdentifier": "r2"}]}
    assert sorted(r.__dict__["correlation_id"] for r in lines.records if r.getMessage() == "in record") == ["r1", "r2"]
    [failed] = [r for r in lines.records if r.getMessage() == RECORD_FAILED]
    assert (failed.__dict__["message_id"], failed.__dict__["correlation_id"]) == ("r2", "r2")


class Remaining:
    """A Lambda context whose remaining time the test sets."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def _run(batch: RecordBatch, event: dict[str, Any], context: Any, concurrency: int) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    try:
        return batch.run(event, context, concurrency=concurrency, loop=loop)
    finally:
        loop.close()


def test_p_proc_1_at_most_n_records_run_at_once_started_in_batch_order() -> None:
    running: list[str] = []
    started: list[str] = []
    most = [0]

    async def handle(record: SQSRecord) -> None:
        started.append(record.body)
        running.append(record.body)
        most[0] = max(most[0], len(running))
        for _ in range(3):  # hand the loop to the other records a few times
            await asyncio.sleep(0)
        running.remove(record.body)

    batch = RecordBatch(Steps(handle, late=[]), actor="a", transport=Visibility(), logger=logging.getLogger("t"))
    assert _run(batch, _event("a", "b", "c", "d", "e"), None, concurrency=2) == {"batchItemFailures": []}
    assert started == ["a", "b", "c", "d", "e"]
    assert most[0] == 2


def test_p_time_6_under_concurrency_a_record_starts_only_while_its_budget_fits() -> None:
    context = Remaining(100.0)
    visibility = Visibility()
    both = asyncio.Event()
    started: list[str] = []

    def admit(batch: RecordBatch, record: SQSRecord) -> None:
        batch.start.admit(message_id=record.message_id, receipt_handle=record.receipt_handle, budget_seconds=30)

    class Timed(Steps):
        def begin(self, batch: RecordBatch) -> Callable[[SQSRecord], Any]:
            async def handle(record: SQSRecord) -> None:
                admit(batch, record)  # judged when the record starts, as the layer's record steps do
                started.append(record.body)
                if len(started) == 2:
                    both.set()
                await both.wait()
                context.seconds = 20.0  # the first round used the time up: 20 - 5 no longer covers 30

            return handle

    batch = RecordBatch(Timed(lambda _r: None, late=[]), actor="a", transport=visibility, logger=logging.getLogger("t"))
    response = _run(batch, _event("r1", "r2", "r3", "r4"), context, concurrency=2)
    assert response == {"batchItemFailures": [{"itemIdentifier": "r3"}, {"itemIdentifier": "r4"}]}
    assert started == ["r1", "r2"]
    assert visibility.changes == [("h-r3", 0), ("h-r4", 0)]  # unstarted: back at once


class Crash(BaseException):
    pass


def test_p_ack_5_a_crash_of_one_concurrent_record_ends_the_invocation_and_its_other_records() -> None:
    ended: list[str] = []

    async def handle(record: SQSRecord) -> None:
        try:
            if record.body == "crash":
                raise Crash
            await asyncio.Event().wait()  # never set: only the crash ends it
        finally:
            ended.append(record.body)

    batch = RecordBatch(Steps(handle, late=[]), actor="a", transport=Visibility(), logger=logging.getLogger("t"))
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(Crash):
            batch.run(_event("slow", "crash"), None, concurrency=2, loop=loop)
        assert not [t for t in asyncio.all_tasks(loop) if not t.done()]  # nothing lives on into the next batch
    finally:
        loop.close()
    assert sorted(ended) == ["crash", "slow"]
