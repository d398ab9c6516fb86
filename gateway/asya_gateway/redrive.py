"""``POST /api/v1/system/dlq/{actor}/redrive`` (GW-DLQ-1): the console's Redrive button, in AWS and locally.

Body ``{"limit"?: 1..1000}`` (default 100). Moves up to ``limit`` messages of ``asya-{ns}-{actor}-dlq`` back to the
actor's queue, where they get a fresh receive count: receive (10 at a time, a 60 s visibility), ``SendMessageBatch``
to the actor's queue with the same bodies and attributes, then ``DeleteMessageBatch`` of exactly the entries the
queue confirmed: :func:`asya.redrive.copy_back`, the copy ``asya dlq redrive`` runs too. Answers 200
``{"actor", "dlq", "moved", "failed", "not_deleted"}``. 404 for a name that is not a user actor or crew with a DLQ,
400 for a bad limit, 502 when SQS refuses (the message names the call and the AWS error code; the unsent messages
stay in the DLQ).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import naming
from asya.redrive import RedriveError, copy_back
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import context_of
from asya_gateway.diagnostic import diagnostic_actors
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import RedriveRequest, parse_body

__all__ = ["redrive_dlq"]


async def redrive_dlq(request: Request) -> Response:
    ctx = context_of(request)
    actor = str(request.path_params["actor"])
    limit = parse_body(RedriveRequest, await read_json_object(request, limit=CREATE_BODY_LIMIT)).limit
    known = set(diagnostic_actors(ctx.manifest))
    if actor not in known:
        raise HttpError(404, f"actor not found: {actor} (actors with a DLQ: {', '.join(sorted(known))})")
    return JSONResponse(await ctx.call(_redrive, ctx.transport.sqs, ctx.manifest.namespace, actor, limit))


def _redrive(sqs: Any, namespace: str, actor: str, limit: int) -> dict[str, Any]:
    dlq, queue = naming.dlq_name(namespace, actor), naming.queue_name(namespace, actor)
    try:
        done = copy_back(sqs, dlq_url=_url(sqs, dlq), dlq=dlq, queue_url=_url(sqs, queue), queue=queue, limit=limit)
    except RedriveError as exc:
        raise HttpError(
            502, f"redrive: {exc.operation} on {exc.queue} failed ({exc.code}); unsent messages stay in the DLQ"
        ) from exc
    return {"actor": actor, "dlq": dlq, **asdict(done)}


def _url(sqs: Any, queue: str) -> str:
    try:
        return str(sqs.get_queue_url(QueueName=queue)["QueueUrl"])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise HttpError(
            502, f"redrive: GetQueueUrl on {queue} failed ({code}); unsent messages stay in the DLQ"
        ) from exc
    except BotoCoreError as exc:
        raise HttpError(502, f"redrive: GetQueueUrl on {queue} failed ({type(exc).__name__})") from exc
