"""In-memory stand-ins for SQS, DynamoDB and S3 that answer every call at once and count the calls (benchmarks only).

The overhead and memory benchmarks measure the layer itself, so the network and AWS must not be in the figure:

- :class:`FakeClient` is a plain object whose methods (``send_message_batch``, ``update_item``...) return what AWS
  would answer, without botocore;
- :func:`botocore_client` is a real boto3 client whose ``before-call`` hook answers in memory, so botocore still
  validates and serialises each request (the CPU a real client spends before the network), but nothing is sent.

Both draw their answers from one :class:`InMemoryAws`, which counts calls by ``(service, operation)``. Answers: every
queue exists; sends succeed; the pre-flight ``BatchGetItem`` finds each asked-for task ``running``; ``UpdateItem``
returns the item with a growing ``last_seq``; other calls answer the empty success shape. Message bodies and items
are not kept, so memory stays flat however much is sent.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["FAKE_ACCOUNT", "FAKE_REGION", "FakeClient", "InMemoryAws", "botocore_client", "operation_name"]

FAKE_REGION: Final = "us-east-1"
FAKE_ACCOUNT: Final = "123456789012"
_CREDENTIALS: Final = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "x"}


def operation_name(method: str) -> str:
    """The API operation of a boto3 method name: ``send_message_batch`` -> ``SendMessageBatch``."""
    return "".join(part[:1].upper() + part[1:] for part in method.split("_"))


class InMemoryAws:
    """Answers AWS calls from memory and counts them. Thread-safe."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self._ids = itertools.count(1)
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()

    def respond(self, service: str, operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls[(service, operation)] += 1
            answer = _ANSWERS.get((service, operation))
            return answer(self, params) if answer is not None else {}

    def _message_id(self) -> str:
        return f"m-{next(self._ids)}"

    def _next_seq(self, pk: str) -> int:
        seq = self._seq.get(pk, 1) + 1
        self._seq[pk] = seq
        return seq


def _queue_url(_aws: InMemoryAws, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"QueueUrl": f"https://sqs.{FAKE_REGION}.amazonaws.com/{FAKE_ACCOUNT}/{params['QueueName']}"}


def _send(aws: InMemoryAws, _params: Mapping[str, Any]) -> dict[str, Any]:
    return {"MessageId": aws._message_id(), "MD5OfMessageBody": "0" * 32}


def _batch_ok(aws: InMemoryAws, params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "Successful": [
            {"Id": entry["Id"], "MessageId": aws._message_id(), "MD5OfMessageBody": "0" * 32}
            for entry in params.get("Entries", [])
        ],
        "Failed": [],
    }


def _queue_attributes(_aws: InMemoryAws, params: Mapping[str, Any]) -> dict[str, Any]:
    name = str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
    return {"Attributes": {"VisibilityTimeout": "60", "QueueArn": f"arn:aws:sqs:{FAKE_REGION}:{FAKE_ACCOUNT}:{name}"}}


def _batch_get(_aws: InMemoryAws, params: Mapping[str, Any]) -> dict[str, Any]:
    responses: dict[str, list[dict[str, Any]]] = {}
    for table, request in params.get("RequestItems", {}).items():
        responses[table] = [
            {"id": {"S": key["pk"]["S"].split("#", 1)[-1]}, "status": {"S": "running"}} for key in request["Keys"]
        ]
    return {"Responses": responses, "UnprocessedKeys": {}}


def _update(aws: InMemoryAws, params: Mapping[str, Any]) -> dict[str, Any]:
    if params.get("ReturnValues", "NONE") == "NONE":
        return {}
    pk = params["Key"]["pk"]["S"]
    return {
        "Attributes": {
            "pk": {"S": pk},
            "sk": params["Key"]["sk"],
            "id": {"S": pk.split("#", 1)[-1]},
            "status": {"S": "running"},
            "status_order": {"N": "1"},
            "created_at": {"S": "2026-01-01T00:00:00.000Z"},
            "progress_percent": {"N": "50"},
            "last_seq": {"N": str(aws._next_seq(pk))},
            "data": {"S": "{}"},
        }
    }


_ANSWERS: Final[Mapping[tuple[str, str], Callable[[InMemoryAws, Mapping[str, Any]], dict[str, Any]]]] = {
    ("sqs", "GetQueueUrl"): _queue_url,
    ("sqs", "SendMessage"): _send,
    ("sqs", "SendMessageBatch"): _batch_ok,
    ("sqs", "DeleteMessageBatch"): _batch_ok,
    ("sqs", "ChangeMessageVisibilityBatch"): _batch_ok,
    ("sqs", "GetQueueAttributes"): _queue_attributes,
    ("dynamodb", "BatchGetItem"): _batch_get,
    ("dynamodb", "UpdateItem"): _update,
    ("dynamodb", "BatchWriteItem"): lambda _aws, _params: {"UnprocessedItems": {}},
    ("dynamodb", "Query"): lambda _aws, _params: {"Items": [], "Count": 0, "ScannedCount": 0},
    ("s3", "PutObject"): lambda _aws, _params: {"ETag": '"0"'},
}


class FakeClient:
    """A boto3-like client of one service: any ``snake_case`` method answers from ``aws``."""

    def __init__(self, service: str, aws: InMemoryAws) -> None:
        self._service = service
        self._aws = aws

    def __getattr__(self, method: str) -> Callable[..., dict[str, Any]]:
        if method.startswith("_"):
            raise AttributeError(method)
        operation = operation_name(method)
        service, aws = self._service, self._aws

        def call(**params: Any) -> dict[str, Any]:
            return aws.respond(service, operation, params)

        # kept on the instance, so later calls skip __getattr__: the fake's own cost stays out of the figure
        setattr(self, method, call)
        return call


def botocore_client(service: str, aws: InMemoryAws, *, session: Any = None) -> Any:
    """A real boto3 client of ``service`` that never sends: its ``before-call`` hook answers from ``aws``. Clients
    made from one ``session`` share its loaded service models (a new session loads them again, about 0.3 s)."""
    import boto3
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    session = session if session is not None else boto3.session.Session()
    client = session.client(service, region_name=FAKE_REGION, endpoint_url="http://127.0.0.1:9", **_CREDENTIALS)

    def answer(model: Any, params: Mapping[str, Any], context: Mapping[str, Any], **_: Any) -> tuple[Any, Any]:
        api_params = context.get("bench_api_params", {})
        http = AWSResponse("http://127.0.0.1:9", 200, HTTPHeaders(), None)
        return http, aws.respond(service, model.name, api_params)

    def keep_params(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_api_params"] = dict(params)

    client.meta.events.register("before-parameter-build", keep_params)
    client.meta.events.register("before-call", answer)
    return client
