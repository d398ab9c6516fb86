"""Batch-level rules shared by the actor runtime (``asya.sidecar``) and the crew (``asya_crew.runtime``).

- Start rule (P-TIME-6): the first record of a batch always starts; a later one starts only while the Lambda's
  remaining time, minus the 5 s safety margin, still covers the record's budget (the actor's call limit; 0 for crew).
  Once one record does not fit, it and every later record fail unstarted and are made visible again at once.
- Return time of failed records (P-ACK-4): unstarted ones at once, others after
  ``min(queue visibility timeout, 5 * 2^(n-1))`` seconds, ``n`` = ``ApproximateReceiveCount``.
- Each failed record is logged once at WARNING, ``record failed: SQS delivers it again`` with ``message_id``,
  ``error_type`` and ``error`` and no traceback (:func:`log_failed_record`): Powertools reports record failures at
  DEBUG only.

No AWS calls; the callers apply the visibility changes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Protocol

from asya.exceptions import AsyaError
from asya.timeout import SAFETY_MARGIN_SECONDS

__all__ = ["RECORD_FAILED", "StartRule", "UnstartedRecordError", "failed_visibilities", "log_failed_record"]

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
