"""Copy a dead-letter queue's messages back to the actor's queue: the one redrive that the gateway's
``POST /api/v1/system/dlq/{actor}/redrive`` and ``asya dlq redrive`` both run.

Receive up to 10 at a time (visibility ``REDRIVE_VISIBILITY``), ``SendMessageBatch`` them to the actor queue unchanged
(body, message attributes, trace header), then delete from the DLQ only the entries the actor queue confirmed: a crash
or a refused delete duplicates a message (the hop claim absorbs it, P-ACK-8), never loses one. It stops at an empty
receive or after ``limit`` messages. It needs no ``sqs:StartMessageMoveTask``, so it runs on moto as on AWS. A failed
receive or send raises :class:`RedriveError`; the unsent messages stay in the DLQ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.exceptions import AsyaError

__all__ = ["REDRIVE_VISIBILITY", "RedriveError", "Redriven", "copy_back"]

REDRIVE_VISIBILITY: Final = 60
_BATCH: Final = 10
_ATTRIBUTE_KEYS: Final = ("DataType", "StringValue", "BinaryValue")


class RedriveError(AsyaError):
    """An SQS call of a redrive failed: ``operation`` on ``queue`` with AWS error ``code``, after ``moved`` messages."""

    def __init__(self, operation: str, queue: str, code: str, moved: int) -> None:
        super().__init__(f"{operation} on {queue} failed: {code}")
        self.operation, self.queue, self.code, self.moved = operation, queue, code, moved


@dataclass(frozen=True, slots=True)
class Redriven:
    """``moved``: now on the actor queue; ``failed``: sends refused (left in the DLQ); ``not_deleted``: sent but
    still in the DLQ (they will be redriven again: a duplicate, P-ACK-7)."""

    moved: int
    failed: int
    not_deleted: int


def copy_back(
    sqs: Any, *, dlq_url: str, dlq: str, queue_url: str, queue: str, limit: int, wait_seconds: int = 0
) -> Redriven:
    """Move up to ``limit`` messages from ``dlq_url`` to ``queue_url`` (names ``dlq``/``queue`` label errors)."""
    moved = failed = not_deleted = 0
    while moved + failed < limit:
        received = _call(
            sqs.receive_message,
            "ReceiveMessage",
            dlq,
            moved,
            QueueUrl=dlq_url,
            MaxNumberOfMessages=min(_BATCH, limit - moved - failed),
            VisibilityTimeout=REDRIVE_VISIBILITY,
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not received:
            break
        entries = [_send_entry(str(index), message) for index, message in enumerate(received)]
        sent = _call(sqs.send_message_batch, "SendMessageBatch", queue, moved, QueueUrl=queue_url, Entries=entries)
        ok = {entry["Id"] for entry in sent.get("Successful", [])}
        failed += len(sent.get("Failed", []))
        confirmed = [message for index, message in enumerate(received) if str(index) in ok]
        not_deleted += _delete(sqs, dlq_url, confirmed)
        moved += len(confirmed)
    return Redriven(moved=moved, failed=failed, not_deleted=not_deleted)


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]]) -> int:
    """Delete ``messages``; the number that could not be deleted (each stays in the DLQ: a later duplicate)."""
    if not messages:
        return 0
    entries = [{"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]} for index, message in enumerate(messages)]
    try:
        response = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    except (ClientError, BotoCoreError):
        return len(messages)
    return len(response.get("Failed", []))


def _send_entry(entry_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """A ``SendMessageBatch`` entry carrying ``message`` unchanged: body, message attributes, trace header."""
    entry: dict[str, Any] = {"Id": entry_id, "MessageBody": message["Body"]}
    attributes = {
        key: {field: value[field] for field in _ATTRIBUTE_KEYS if field in value}
        for key, value in (message.get("MessageAttributes") or {}).items()
    }
    if attributes:
        entry["MessageAttributes"] = attributes
    trace = (message.get("Attributes") or {}).get("AWSTraceHeader")
    if trace:
        entry["MessageSystemAttributes"] = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    return entry


def _call(method: Any, operation: str, queue: str, moved: int, **kwargs: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = method(**kwargs)
    except ClientError as exc:
        raise RedriveError(
            operation, queue, str(exc.response.get("Error", {}).get("Code", "unknown error")), moved
        ) from exc
    except BotoCoreError as exc:
        raise RedriveError(operation, queue, type(exc).__name__, moved) from exc
    return result
