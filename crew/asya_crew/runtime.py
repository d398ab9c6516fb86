"""The batch loop x-sink and x-sump share (PROTOCOL P-PROC-3: steps 1, 2 and 15 of P-PROC-2, P-ACK-1..3).

Records run one at a time in batch order through Powertools ``BatchProcessor`` (``EventType.SQS``); a record whose
handler raises is reported in ``batchItemFailures`` and never affects the others. Start rule (P-TIME-6) with budget
``B = 0`` for crew: the first record always starts; a later one starts only while the Lambda has at least the 5 s
safety margin left, otherwise it and every later record fail unstarted and are made visible again at once (best
effort).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya.exceptions import AsyaError
from asya.timeout import SAFETY_MARGIN_SECONDS

__all__ = ["SAFETY_MARGIN_SECONDS", "UnstartedRecordError", "run_batch"]


class UnstartedRecordError(AsyaError):
    """The record was not started under the start rule (P-TIME-6); SQS delivers it again."""


def run_batch(
    event: Mapping[str, Any],
    context: Any,
    record_handler: Callable[[SQSRecord], None],
    *,
    release: Callable[[list[str]], None],
) -> dict[str, Any]:
    """Run ``record_handler`` on every record; ``{"batchItemFailures": [...]}``. ``release`` gets the receipt handles
    of unstarted records."""
    started = 0
    unstarted: list[str] = []

    def handle(record: SQSRecord) -> None:
        nonlocal started
        if started and (unstarted or not _time_left(context)):
            unstarted.append(record.receipt_handle)
            raise UnstartedRecordError(f"record {record.message_id} not started: not enough Lambda time left")
        started += 1
        record_handler(record)

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=dict(event), record_handler=handle, processor=processor, context=context)
    if unstarted:
        release(unstarted)
    return dict(response)


def _time_left(context: Any) -> bool:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return remaining is None or remaining() / 1000 - SAFETY_MARGIN_SECONDS >= 0
