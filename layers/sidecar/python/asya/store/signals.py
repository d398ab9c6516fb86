"""Signals buffered on the task item (P-WAIT-5): a signal of an event that no ``wait_for`` waits for yet.

A task item holds at most one buffered signal per event, as the attribute ``signal:<event>`` (its data as JSON
text, at most :data:`MAX_SIGNAL_BYTES`). :func:`buffer_signal` writes it with ONE conditional ``UpdateItem``: the
task exists and is not terminal, no signal of the event is buffered, and the task does not wait for that event
(``waiting_event``, which x-pause's ``paused`` write sets for a ``wait_for`` and every resume removes). The pause write
and this one touch the same item, so DynamoDB orders them: a signal buffered first is seen by x-pause's read after
its pause write, and a pause written first makes the buffering fail with ``waiting``, so the gateway delivers the
signal itself. A buffered signal stays until a ``wait_for`` of its event takes it (:func:`take_signal`) or the task
item expires after the task ends (GW-DATA-5).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal

from botocore.exceptions import ClientError

from asya.store import records as rec

__all__ = ["MAX_SIGNAL_BYTES", "SIGNAL_PREFIX", "BufferOutcome", "buffer_signal", "buffered_signal", "take_signal"]

SIGNAL_PREFIX: Final = "signal:"
#: The largest signal data (its JSON text) the gateway accepts: a task item stays far under DynamoDB's 400 KB.
MAX_SIGNAL_BYTES: Final = 64 * 1024
#: ``status_order`` of the terminal statuses.
_TERMINAL_ORDER: Final = 3

BufferOutcome = Literal["buffered", "duplicate", "waiting", "ended", "not_found"]


def _attribute(event: str) -> str:
    return SIGNAL_PREFIX + event


def buffer_signal(dynamodb: Any, table: str, task_id: str, event: str, data: Any) -> BufferOutcome:
    """Buffer ``data`` as the signal of ``event`` (one conditional write); what happened: ``buffered``;
    ``duplicate`` (a signal of the event is already buffered); ``waiting`` (the task waits for the event: deliver it);
    ``ended`` (the task is terminal); ``not_found``."""
    try:
        dynamodb.update_item(
            TableName=table,
            Key=rec.key(task_id, rec.TASK_SK),
            UpdateExpression="SET #sig = :data",
            ConditionExpression=(
                "attribute_exists(#pk) AND #order < :terminal AND attribute_not_exists(#sig)"
                " AND (attribute_not_exists(#waiting) OR #waiting <> :event)"
            ),
            ExpressionAttributeNames={
                "#pk": "pk",
                "#order": "status_order",
                "#sig": _attribute(event),
                "#waiting": "waiting_event",
            },
            ExpressionAttributeValues={
                ":data": rec.str_av(json.dumps(data, separators=(",", ":"), ensure_ascii=False)),
                ":terminal": rec.num_av(_TERMINAL_ORDER),
                ":event": rec.str_av(event),
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        found: Any = exc.response.get("Item")
        item: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if not item:
            return "not_found"
        if (rec.get_int(item, "status_order") or 0) >= _TERMINAL_ORDER:
            return "ended"
        if _attribute(event) in item:
            return "duplicate"
        return "waiting"
    return "buffered"


def buffered_signal(item: Mapping[str, Any], event: str) -> tuple[bool, Any]:
    """``(True, data)`` when the raw task ``item`` holds a buffered signal of ``event``, else ``(False, None)``."""
    text = rec.get_str(item, _attribute(event))
    if text is None:
        return False, None
    return True, json.loads(text)


def take_signal(dynamodb: Any, table: str, task_id: str, event: str) -> None:
    """Remove the buffered signal of ``event`` once it was delivered (one unconditional write)."""
    dynamodb.update_item(
        TableName=table,
        Key=rec.key(task_id, rec.TASK_SK),
        UpdateExpression="REMOVE #sig",
        ExpressionAttributeNames={"#sig": _attribute(event)},
    )
