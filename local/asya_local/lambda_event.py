"""The SQS event and the context object a Lambda function receives, built from ``ReceiveMessage`` results.

``sqs_event(messages, queue_arn=..., region=...)`` returns exactly the shape the Lambda service sends for an SQS event
source mapping (canonical example: ``tests/events/sqs_event.json``)::

    {"Records": [{"messageId", "receiptHandle", "body",
                  "attributes": {"ApproximateReceiveCount", "SentTimestamp", "SenderId",
                                 "ApproximateFirstReceiveTimestamp", ...optional system attributes},
                  "messageAttributes": {name: {"stringValue"?, "binaryValue"? (base64), "stringListValues",
                                               "binaryListValues", "dataType"}},
                  "md5OfBody", "md5OfMessageAttributes"? (only when the message has attributes),
                  "eventSource": "aws:sqs", "eventSourceARN", "awsRegion"}]}

``scheduled_event(rule_arn, ...)`` returns the event an EventBridge rule with a schedule sends a Lambda target::

    {"version": "0", "id", "detail-type": "Scheduled Event", "source": "aws.events", "account", "time", "region",
     "resources": [rule_arn], "detail": {}}

``LambdaContext`` carries the attributes of the Python runtime's context object; ``get_remaining_time_in_millis()``
counts down from the function's timeout (P-MAN-4) on an injected monotonic clock.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageAttributeValueOutputTypeDef, MessageTypeDef

__all__ = [
    "LAMBDA_RECORD_ATTRIBUTES",
    "LambdaContext",
    "function_arn",
    "rule_arn",
    "scheduled_event",
    "sqs_event",
    "sqs_record",
]

#: System attributes Lambda always puts in a record's ``attributes``.
LAMBDA_RECORD_ATTRIBUTES: Final = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
)
#: System attributes Lambda adds only when SQS has them (tracing, FIFO queues, redriven messages).
_OPTIONAL_ATTRIBUTES: Final = (
    "AWSTraceHeader",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SequenceNumber",
    "DeadLetterQueueSourceArn",
)


def sqs_record(message: MessageTypeDef, *, queue_arn: str, region: str) -> dict[str, Any]:
    """One Lambda SQS record from one ``ReceiveMessage`` message (requested with all attributes)."""
    system = message.get("Attributes", {})
    attributes = {name: system.get(name, "") for name in LAMBDA_RECORD_ATTRIBUTES}
    attributes.update({name: system[name] for name in _OPTIONAL_ATTRIBUTES if name in system})
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": attributes,
        "messageAttributes": {
            name: _message_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record.update(eventSource="aws:sqs", eventSourceARN=queue_arn, awsRegion=region)
    return record


def sqs_event(messages: Sequence[MessageTypeDef], *, queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda event for one batch of messages."""
    return {"Records": [sqs_record(message, queue_arn=queue_arn, region=region) for message in messages]}


def _message_attribute(value: MessageAttributeValueOutputTypeDef) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        out["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
    out["stringListValues"] = list(value.get("StringListValues", []))
    out["binaryListValues"] = [base64.b64encode(item).decode("ascii") for item in value.get("BinaryListValues", [])]
    out["dataType"] = value["DataType"]
    return out


def scheduled_event(rule: str, *, now: datetime, region: str, account_id: str) -> dict[str, Any]:
    """The event of one run of a scheduled EventBridge rule (ARN ``rule``) at ``now`` (UTC)."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account_id,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule],
        "detail": {},
    }


def rule_arn(rule_name: str, *, region: str, account_id: str) -> str:
    return f"arn:aws:events:{region}:{account_id}:rule/{rule_name}"


def function_arn(function_name: str, *, region: str, account_id: str) -> str:
    return f"arn:aws:lambda:{region}:{account_id}:function:{function_name}"


class LambdaContext:
    """The context object of one invocation, as the Lambda Python runtime passes it."""

    def __init__(
        self,
        *,
        function_name: str,
        invoked_function_arn: str,
        memory_limit_in_mb: int,
        timeout_seconds: float,
        log_stream_name: str,
        monotonic: Callable[[], float],
        function_version: str = "$LATEST",
        aws_request_id: str | None = None,
        client_context: Mapping[str, Any] | None = None,
    ) -> None:
        self.function_name = function_name
        self.function_version = function_version
        self.invoked_function_arn = invoked_function_arn
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = aws_request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = log_stream_name
        self.identity: Any = None
        self.client_context = client_context
        self.timeout_seconds = timeout_seconds
        self._monotonic = monotonic
        self._deadline = monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before Lambda would stop this invocation (never negative)."""
        return max(0, int((self._deadline - self._monotonic()) * 1000))

    def __repr__(self) -> str:
        return f"LambdaContext(function_name={self.function_name!r}, aws_request_id={self.aws_request_id!r})"
