"""The mesh-wide count of records a batch handed back to SQS (docs/deploy.md, alarm ``FailedRecords``).

A record failed in a partial batch response (``batchItemFailures``) is not a Lambda error: the function returned
normally, so its ``Errors`` metric stays at zero while records keep coming back. Each invocation that hands back at
least one record prints one EMF metric ``FailedRecords`` (namespace ``Asya``, dimension ``Namespace`` only, so one
mesh-level alarm watches every actor without a resource per actor) with the number of records it handed back.
"""

from __future__ import annotations

from typing import Final

from asya.countmetric import METRICS_NAMESPACE, emit_count

__all__ = ["FAILED_RECORDS_METRIC", "METRICS_NAMESPACE", "record_failed_records"]

FAILED_RECORDS_METRIC: Final = "FailedRecords"


def record_failed_records(namespace: str, count: int) -> None:
    """Print the EMF line for ``count`` records handed back by one invocation (nothing when ``count`` is 0)."""
    if count <= 0:
        return
    emit_count(FAILED_RECORDS_METRIC, count, {"Namespace": namespace})
