"""Fault rules of the IAM proxy: AWS throttling played on the artifact mesh, where the functions run as separate
processes and no botocore hook of the test reaches their clients (docs/http.md GW-OVL).

A :class:`FaultRule` names a principal (a function's role name, or ``*``), an IAM action (``dynamodb:PutItem``) and
the AWS error to answer, ``times`` times: an allowed call that matches is answered with that error and never reaches
moto, as AWS answers a throttled call. :func:`fault_answer` builds the answer in the service's wire protocol, so
botocore raises the ``ClientError`` with that code (and its standard retry mode retries it, as against AWS):

- S3 (REST-XML): ``<Error><Code>SlowDown</Code>`` with the rule's status (503 for ``SlowDown``);
- JSON services (DynamoDB, KMS, Secrets Manager, Lambda): ``{"__type": "...#<code>"}``, status 400 (429 for
  Lambda's ``TooManyRequestsException``, as given by the rule);
- SQS and CloudWatch over JSON: ``x-amzn-query-error: <code>;Sender`` as well, from which botocore takes the code;
- query protocol: ``<ErrorResponse><Error><Code>``.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from typing import Final
from xml.sax.saxutils import escape

from asya_local.iam.denials import Denial

__all__ = ["FaultRule", "FaultRules", "fault_answer"]

_QUERY_COMPATIBLE: Final = frozenset({"sqs", "monitoring"})


@dataclass(frozen=True, slots=True)
class FaultRule:
    """Answer ``times`` allowed calls of ``action`` by ``principal`` (``*``: any) with the AWS error ``code``."""

    action: str
    code: str
    status: int = 400
    principal: str = "*"
    times: int = 1


class FaultRules:
    """The proxy's fault rules, each with the calls it still answers; thread-safe."""

    def __init__(self) -> None:
        self._left: list[tuple[FaultRule, list[int]]] = []
        self._lock = threading.Lock()
        #: ``(principal, action, code)`` of every answered fault, in order
        self.played: list[tuple[str, str, str]] = []

    def add(self, rule: FaultRule) -> None:
        with self._lock:
            self._left.append((rule, [rule.times]))

    def clear(self) -> None:
        with self._lock:
            self._left.clear()

    def take(self, principal: str, actions: list[str]) -> FaultRule | None:
        """The first rule matching a call of ``principal`` with these ``actions``, counted; ``None``: none left."""
        with self._lock:
            for rule, left in self._left:
                if left[0] > 0 and rule.principal in ("*", principal) and rule.action in actions:
                    left[0] -= 1
                    self.played.append((principal, rule.action, rule.code))
                    return rule
        return None


def fault_answer(service: str, json_protocol: bool, rule: FaultRule) -> Denial:
    """The HTTP answer of ``rule`` for a request to ``service`` (its SigV4 name), over JSON or not."""
    request_id = str(uuid.uuid4())
    message = f"injected by the IAM proxy's fault rule ({rule.action})"
    if service == "s3":
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{escape(rule.code)}</Code>'
            f"<Message>{escape(message)}</Message><RequestId>{request_id}</RequestId></Error>"
        )
        return Denial(rule.status, {"Content-Type": "application/xml", "x-amz-request-id": request_id}, xml.encode())
    if json_protocol:
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}
        if service in _QUERY_COMPATIBLE:
            headers["x-amzn-query-error"] = f"{rule.code};Sender"
        body = json.dumps({"__type": f"com.amazon.coral.service#{rule.code}", "message": message}).encode()
        return Denial(rule.status, headers, body)
    xml = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{escape(rule.code)}</Code>"
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return Denial(rule.status, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, xml.encode())
