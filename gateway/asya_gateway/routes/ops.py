"""``GET /health`` (GW-OPS-1): liveness without any AWS call; ``GET /openapi.json`` (GW-OPS-2);
``POST /api/v1/system/mq-diagnostic`` (GW-OPS-3)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import naming
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import context_of
from asya_gateway.diagnostic import QueueDiagnostic, diagnostic_actors
from asya_gateway.errors import HttpError
from asya_gateway.openapi import openapi_document
from asya_gateway.version import VERSION

__all__ = ["health", "mq_diagnostic", "openapi"]


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": VERSION})


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(context_of(request).manifest, version=VERSION))


async def mq_diagnostic(request: Request) -> Response:
    """Optional body ``{"actors": [name, ...]}``; default every actor of the manifest, crew and aggregators included."""
    ctx = context_of(request)
    body = await read_json_object(request, limit=CREATE_BODY_LIMIT)
    for key in body:
        if key != "actors":
            raise HttpError(400, f"unknown field '{key}'")
    known = diagnostic_actors(ctx.manifest)
    actors = body.get("actors")
    if actors is None:
        actors = known
    elif not isinstance(actors, list) or not all(isinstance(name, str) for name in actors):
        raise HttpError(400, "actors must be an array of actor names")
    for name in actors:
        if name not in known and name not in naming.FIXED_CREW:
            raise HttpError(400, f"actors: unknown actor '{name}'")
    diagnostic = QueueDiagnostic(
        namespace=ctx.manifest.namespace,
        sqs=ctx.transport.sqs,
        clock=ctx.clock,
        cloudwatch=ctx.cloudwatch,
        use_cloudwatch=ctx.config.in_lambda,
    )
    return JSONResponse(await ctx.call(diagnostic.check, actors))
