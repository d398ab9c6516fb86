"""The answer AWS gives a caller its policies deny, per service and wire protocol, so that botocore raises the same
``ClientError`` it would raise in AWS.

- S3 (REST-XML): 403 ``<Error><Code>AccessDenied</Code>...``; a HEAD gets the 403 with no body, as S3 answers it
  (botocore then reports the code ``403``, as it does against AWS).
- DynamoDB, KMS, Secrets Manager (JSON): 400 ``{"__type": "...#AccessDeniedException", "message": ...}``.
- SQS and CloudWatch over JSON: these services were query services and say so with ``x-amzn-query-error:
  AccessDenied;Sender``, from which botocore takes the code ``AccessDenied`` (as over their query protocol).
- Query protocol (SQS, STS, CloudWatch): 403 ``<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>``.

The message has AWS's shape: "User: <principal ARN> is not authorized to perform: <action> on resource: <resource>
because ...".
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Final
from xml.sax.saxutils import escape

__all__ = ["Denial", "denial_message", "denial_response", "principal_arn"]

_QUERY_COMPATIBLE: Final = frozenset({"sqs", "monitoring"})
_JSON_TYPE: Final = "com.amazon.coral.service#AccessDeniedException"


@dataclass(frozen=True, slots=True)
class Denial:
    """A ready HTTP answer."""

    status: int
    headers: dict[str, str]
    body: bytes


def principal_arn(principal: str, account_id: str) -> str:
    """How AWS names a Lambda function's role session: ``assumed-role/<role>/<session>``."""
    return f"arn:aws:sts::{account_id}:assumed-role/{principal}/{principal}"


def denial_message(principal: str, account_id: str, action: str, resource: str, why: str) -> str:
    return (
        f"User: {principal_arn(principal, account_id)} is not authorized to perform: {action} "
        f"on resource: {resource} because {why}"
    )


def denial_response(service: str, method: str, json_protocol: bool, message: str) -> Denial:
    """The denial for a request to ``service`` (its SigV4 name) sent with ``method``, over JSON or not."""
    request_id = str(uuid.uuid4())
    if service == "s3":
        if method == "HEAD":
            return Denial(403, {"x-amz-request-id": request_id, "Content-Length": "0"}, b"")
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{escape(message)}</Message><RequestId>{request_id}</RequestId>"
            f"<HostId>{request_id}</HostId></Error>"
        )
        return Denial(403, {"Content-Type": "application/xml", "x-amz-request-id": request_id}, xml.encode())
    if json_protocol:
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}
        if service in _QUERY_COMPATIBLE:
            headers["x-amzn-query-error"] = "AccessDenied;Sender"
        body = json.dumps({"__type": _JSON_TYPE, "message": message}).encode()
        return Denial(400, headers, body)
    xml = (
        "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return Denial(403, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, xml.encode())
