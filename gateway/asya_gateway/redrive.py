"""``POST /api/v1/system/dlq/{actor}/redrive`` (GW-DLQ-1): the console's Redrive button, in AWS and locally.

Body ``{"limit"?: 1..1000}`` (default 100). Moves up to ``limit`` messages of ``asya-{ns}-{actor}-dlq`` back to the
actor's queue, where they get a fresh receive count: receive (10 at a time, a 60 s visibility), ``SendMessageBatch``
to the actor's queue with the same bodies and attributes, then ``DeleteMessageBatch`` of exactly the entries the
queue confirmed: a failure duplicates a message (absorbed by the hop claim, P-ACK-8), never loses one. The same copy
method as ``asya dlq redrive`` uses locally (``asya_local.dlq``): it needs no ``sqs:StartMessageMoveTask``, which moto
lacks, and it stops at ``limit``. Answers 200 ``{"actor", "dlq", "moved", "failed", "not_deleted"}``. 404 for a name
that is not a user actor or crew with a DLQ, 400 for a bad limit, 502 when SQS refuses (the message names the
call and the AWS error code; the unsent messages stay in the DLQ).
"""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import naming
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import context_of
from asya_gateway.diagnostic import diagnostic_actors
from asya_gateway.errors import HttpError

__all__ = ["redrive_dlq"]

_DEFAULT_LIMIT: Final = 100
_MAX_LIMIT: Final = 1000
_VISIBILITY: Final = 60


async def redrive_dlq(request: Request) -> Response:
    ctx = context_of(request)
    actor = str(request.path_params["actor"])
    body = await read_json_object(request, limit=CREATE_BODY_LIMIT)
    for key in body:
        if key != "limit":
            raise HttpError(400, f"unknown field '{key}' (fields: limit)")
    limit = body.get("limit", _DEFAULT_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_LIMIT:
        raise HttpError(400, f"limit: a whole number 1..{_MAX_LIMIT}, got {limit!r}")
    known = set(diagnostic_actors(ctx.manifest))
    if actor not in known:
        raise HttpError(404, f"actor not found: {actor} (actors with a DLQ: {', '.join(sorted(known))})")
    return JSONResponse(await ctx.call(_redrive, ctx.transport.sqs, ctx.manifest.namespace, actor, limit))


def _redrive(sqs: Any, namespace: str, actor: str, limit: int) -> dict[str, Any]:
    dlq, queue = naming.dlq_name(namespace, actor), naming.queue_name(namespace, actor)
    dlq_url = _call(sqs.get_queue_url, "GetQueueUrl", dlq, QueueName=dlq)["QueueUrl"]
    queue_url = _call(sqs.get_queue_url, "GetQueueUrl", queue, QueueName=queue)["QueueUrl"]
    moved = failed = not_deleted = 0
    while moved + failed < limit:
        received = _call(
            sqs.receive_message,
            "ReceiveMessage",
            dlq,
            QueueUrl=dlq_url,
            MaxNumberOfMessages=min(10, limit - moved - failed),
            VisibilityTimeout=_VISIBILITY,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not received:
            break
        entries = [_entry(str(index), message) for index, message in enumerate(received)]
        sent = _call(sqs.send_message_batch, "SendMessageBatch", queue, QueueUrl=queue_url, Entries=entries)
        confirmed = {entry["Id"] for entry in sent.get("Successful", [])}
        failed += len(sent.get("Failed", []))
        deletes = [
            {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
            for index, message in enumerate(received)
            if str(index) in confirmed
        ]
        if deletes:
            deleted = _call(sqs.delete_message_batch, "DeleteMessageBatch", dlq, QueueUrl=dlq_url, Entries=deletes)
            not_deleted += len(deleted.get("Failed", []))
        moved += len(deletes)
    return {"actor": actor, "dlq": dlq, "moved": moved, "failed": failed, "not_deleted": not_deleted}


def _entry(entry_id: str, message: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"Id": entry_id, "MessageBody": message["Body"]}
    if message.get("MessageAttributes"):
        entry["MessageAttributes"] = message["MessageAttributes"]
    return entry


def _call(method: Any, operation: str, queue: str, **kwargs: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = method(**kwargs)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise HttpError(
            502, f"redrive: {operation} on {queue} failed ({code}); unsent messages stay in the DLQ"
        ) from exc
    except BotoCoreError as exc:
        raise HttpError(502, f"redrive: {operation} on {queue} failed ({type(exc).__name__})") from exc
    return result
