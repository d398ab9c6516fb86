"""What IAM checks for one raw HTTP request to moto: the action(s), resource ARN(s) and request context.

:func:`authorize_request` reads one request as botocore (1.44) sends it and answers a list of
:class:`RequestContext` (every one must be allowed), or ``None`` for a request it does not model (the proxy denies
those for a checked principal and records them as unmodelled: nothing passes unchecked). The service comes from the
SigV4 credential scope (:mod:`asya_local.iam.sigv4`), else from the JSON ``X-Amz-Target`` prefix.

- **SQS** (JSON protocol ``X-Amz-Target: AmazonSQS.<Op>``, and the query protocol ``Action=<Op>``): resource
  ``arn:aws:sqs:<region>:<account>:<queue>`` from ``QueueUrl`` (``CreateQueue``/``GetQueueUrl``: ``QueueName``).
  The batch calls are authorized as their single forms (``SendMessageBatch`` -> ``sqs:SendMessage``).
- **DynamoDB** (``DynamoDB_20120810.<Op>``): ``table/<name>``; ``Query``/``Scan`` with ``IndexName``:
  ``table/<name>/index/<index>``. ``BatchGetItem``/``BatchWriteItem``: one check per table touched;
  ``TransactGetItems``/``TransactWriteItems``: the item actions (``GetItem``, ``PutItem``, ``UpdateItem``,
  ``DeleteItem``, ``ConditionCheckItem``) per table, as AWS authorizes them. ``dynamodb:Select`` and
  ``dynamodb:ReturnValues`` go into the context when sent; ``dynamodb:LeadingKeys``/``Attributes`` do not.
- **S3**: see :mod:`asya_local.iam.s3requests`.
- **KMS** (``TrentService.<Op>``): the key ARN from ``KeyId`` (an alias stays an alias ARN: it is not resolved).
  ``Decrypt`` without ``KeyId`` names no key and is unmodelled.
- **CloudWatch** (JSON, query or RPCv2-CBOR): ``PutMetricData`` (with ``cloudwatch:namespace`` when readable),
  ``GetMetricStatistics``, ``GetMetricData``, ``ListMetrics`` on ``*``.
- **Secrets Manager**: ``GetSecretValue``/``DescribeSecret`` on the secret's ARN. AWS authorizes the full ARN, random
  suffix included: a ``SecretId`` given by name is resolved by ``resolve_secret`` (the proxy asks moto), so a grant on
  ``secret:<name>-??????`` (CDK's ``from_secret_name_v2``) matches; a name that does not resolve (no resolver, or no
  such secret) is checked as ``secret:<name>``. An ARN is checked as given: the artifact mesh resolves a template's
  ``Ref`` of a secret to a partial ARN, and the grants derived from it name the same.
- **STS** ``GetCallerIdentity``: in :data:`asya_local.iam.model.ALWAYS_ALLOWED` (AWS allows it to everyone).

Every context carries ``aws:RequestedRegion``, ``aws:PrincipalAccount`` and ``aws:SecureTransport`` = ``"true"``:
the mesh talks plain HTTP to loopback, but the same calls go over HTTPS in AWS, and that is what is being judged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from asya_local.iam.model import RequestContext, base_context
from asya_local.iam.s3requests import s3_checks
from asya_local.iam.sigv4 import credential_of

__all__ = ["authorize_request"]


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    url: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    region: str
    account_id: str
    resolve_secret: Callable[[str], str | None] | None = None

    def target(self) -> tuple[str, str] | None:
        prefix, dot, operation = self.headers.get("x-amz-target", "").partition(".")
        return (prefix, operation) if dot and operation else None

    def json(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def form(self) -> dict[str, str]:
        """Query-protocol parameters: the URL's query merged with a form-encoded body."""
        merged = {k: v[0] for k, v in parse_qs(urlsplit(self.url).query).items()}
        if self.body and "json" not in self.headers.get("content-type", ""):
            text = self.body.decode("utf-8", "replace")
            merged.update({k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()})
        return merged

    def arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{self.account_id}:{resource}"


def authorize_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    region: str,
    account_id: str,
    resolve_secret: Callable[[str], str | None] | None = None,
) -> list[RequestContext] | None:
    """The IAM checks one HTTP request needs, or ``None`` when this module does not model the request.
    ``resolve_secret`` maps a ``SecretId`` to the secret's full ARN (``None``: unknown)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    request = _Request(method.upper(), url, lowered, body, region, account_id, resolve_secret)
    credential = credential_of(lowered, url)
    service = credential.service if credential is not None else _service_from_target(request)
    if service == "s3":
        return s3_checks(
            request.method, url, lowered, body, context=base_context(region, account_id), credential=credential
        )
    handler = _HANDLERS.get(service or "")
    return handler(request) if handler is not None else None


_TARGET_SERVICES: Final = {
    "AmazonSQS": "sqs",
    "DynamoDB_20120810": "dynamodb",
    "TrentService": "kms",
    "GraniteServiceVersion20100801": "monitoring",
    "secretsmanager": "secretsmanager",
}


def _service_from_target(request: _Request) -> str | None:
    target = request.target()
    return _TARGET_SERVICES.get(target[0]) if target else None


def _check(
    request: _Request, service: str, action: str, resources: list[str], operation: str, **extra: str
) -> RequestContext:
    context = base_context(request.region, request.account_id)
    context.update(extra)
    return RequestContext(service, f"{service}:{action}", tuple(dict.fromkeys(resources)), context, operation)


# --- SQS ---

_SQS_BY_URL: Final = {
    "SendMessage": "SendMessage",
    "SendMessageBatch": "SendMessage",
    "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "GetQueueAttributes": "GetQueueAttributes",
    "SetQueueAttributes": "SetQueueAttributes",
    "PurgeQueue": "PurgeQueue",
    "DeleteQueue": "DeleteQueue",
    "ListQueueTags": "ListQueueTags",
    "TagQueue": "TagQueue",
    "UntagQueue": "UntagQueue",
    "ListDeadLetterSourceQueues": "ListDeadLetterSourceQueues",
}
_SQS_BY_NAME: Final = frozenset({"CreateQueue", "GetQueueUrl"})


def _sqs(request: _Request) -> list[RequestContext] | None:
    target = request.target()
    if target is not None:
        operation, params = target[1], request.json()
    else:
        form = request.form()
        operation, params = form.get("Action", ""), dict(form)
    if operation == "ListQueues":
        return [_check(request, "sqs", "ListQueues", ["*"], operation)]
    if operation in _SQS_BY_NAME:
        name = params.get("QueueName")
        if not isinstance(name, str) or not name:
            return None
        owner = params.get("QueueOwnerAWSAccountId") or request.account_id
        arn = f"arn:aws:sqs:{request.region}:{owner}:{name}"
        return [_check(request, "sqs", operation, [arn], operation)]
    action = _SQS_BY_URL.get(operation)
    if action is None:
        return None
    queue_url = params.get("QueueUrl") or request.url
    parts = [part for part in urlsplit(str(queue_url)).path.split("/") if part]
    if len(parts) < 2:
        return None
    account, name = parts[-2], parts[-1]
    return [_check(request, "sqs", action, [f"arn:aws:sqs:{request.region}:{account}:{name}"], operation)]


# --- DynamoDB ---

_DYNAMODB_ONE_TABLE: Final = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "DescribeTable",
        "CreateTable",
        "DeleteTable",
        "UpdateTable",
        "UpdateTimeToLive",
        "DescribeTimeToLive",
        "DescribeContinuousBackups",
    }
)
_TRANSACT_WRITE: Final = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _dynamodb(request: _Request) -> list[RequestContext] | None:
    target = request.target()
    if target is None or target[0] != "DynamoDB_20120810":
        return None
    operation, params = target[1], request.json()
    extra = {f"dynamodb:{key}": params[key] for key in ("Select", "ReturnValues") if isinstance(params.get(key), str)}

    def table(name: object, index: object = None) -> str | None:
        if not isinstance(name, str) or not name:
            return None
        resource = name if name.startswith("arn:") else request.arn("dynamodb", f"table/{name}")
        return f"{resource}/index/{index}" if isinstance(index, str) and index else resource

    if operation == "ListTables":
        return [_check(request, "dynamodb", operation, ["*"], operation)]
    if operation in _DYNAMODB_ONE_TABLE:
        arn = table(params.get("TableName"), params.get("IndexName") if operation in ("Query", "Scan") else None)
        return None if arn is None else [_check(request, "dynamodb", operation, [arn], operation, **extra)]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        items = params.get("RequestItems")
        arns = [table(name) for name in items] if isinstance(items, dict) and items else [None]
        if None in arns:
            return None
        return [_check(request, "dynamodb", operation, [a for a in arns if a], operation, **extra)]
    if operation in ("TransactGetItems", "TransactWriteItems"):
        return _transact(request, operation, params, table)
    return None


def _transact(request: _Request, operation: str, params: dict[str, Any], table: Any) -> list[RequestContext] | None:
    by_action: dict[str, list[str]] = {}
    items = params.get("TransactItems")
    if not isinstance(items, list) or not items:
        return None
    for item in items:
        kinds = {"Get": "GetItem"} if operation == "TransactGetItems" else _TRANSACT_WRITE
        found = [(action, body) for kind, action in kinds.items() if isinstance(body := item.get(kind), dict)]
        if len(found) != 1:
            return None
        action, body = found[0]
        arn = table(body.get("TableName"))
        if arn is None:
            return None
        by_action.setdefault(action, []).append(arn)
    return [_check(request, "dynamodb", action, arns, operation) for action, arns in by_action.items()]


# --- KMS, CloudWatch, Secrets Manager, STS ---

_KMS_KEYED: Final = frozenset(
    {"Encrypt", "Decrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext", "DescribeKey", "Sign", "Verify"}
)
_KMS_UNSCOPED: Final = frozenset({"CreateKey", "ListKeys", "ListAliases"})


def _kms(request: _Request) -> list[RequestContext] | None:
    target = request.target()
    if target is None:
        return None
    operation, params = target[1], request.json()
    if operation in _KMS_UNSCOPED:
        return [_check(request, "kms", operation, ["*"], operation)]
    key = params.get("KeyId")
    if operation not in _KMS_KEYED or not isinstance(key, str) or not key:
        return None
    arn = key if key.startswith("arn:") else request.arn("kms", key if key.startswith("alias/") else f"key/{key}")
    return [_check(request, "kms", operation, [arn], operation)]


_CLOUDWATCH: Final = frozenset({"PutMetricData", "GetMetricStatistics", "GetMetricData", "ListMetrics"})


def _cloudwatch(request: _Request) -> list[RequestContext] | None:
    target = request.target()
    path = urlsplit(request.url).path
    extra: dict[str, str] = {}
    if target is not None:
        operation, namespace = target[1], request.json().get("Namespace")
    elif "/operation/" in path:  # RPCv2-CBOR: the body is CBOR, which this module does not decode
        operation, namespace = path.rsplit("/operation/", 1)[1], None
    else:
        form = request.form()
        operation, namespace = form.get("Action", ""), form.get("Namespace")
    if operation not in _CLOUDWATCH:
        return None
    if operation == "PutMetricData" and isinstance(namespace, str):
        extra["cloudwatch:namespace"] = namespace
    return [_check(request, "cloudwatch", operation, ["*"], operation, **extra)]


def _secretsmanager(request: _Request) -> list[RequestContext] | None:
    target = request.target()
    if target is None or target[1] not in ("GetSecretValue", "DescribeSecret"):
        return None
    secret = request.json().get("SecretId")
    if not isinstance(secret, str) or not secret:
        return None
    if secret.startswith("arn:"):
        arn = secret
    else:
        resolved = request.resolve_secret(secret) if request.resolve_secret is not None else None
        arn = resolved or request.arn("secretsmanager", f"secret:{secret}")
    return [_check(request, "secretsmanager", target[1], [arn], target[1])]


def _sts(request: _Request) -> list[RequestContext] | None:
    if request.form().get("Action") != "GetCallerIdentity":
        return None
    return [_check(request, "sts", "GetCallerIdentity", ["*"], "GetCallerIdentity")]


_HANDLERS: Final = {
    "sqs": _sqs,
    "dynamodb": _dynamodb,
    "kms": _kms,
    "monitoring": _cloudwatch,
    "secretsmanager": _secretsmanager,
    "sts": _sts,
}
