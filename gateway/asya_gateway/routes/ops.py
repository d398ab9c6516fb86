"""``GET /health`` (GW-OPS-1): liveness without any AWS call; ``GET /openapi.json`` (GW-OPS-2);
``POST /api/v1/system/mq-diagnostic`` (GW-OPS-3).

The diagnostic's ``actors`` list holds at most :data:`MAX_DIAGNOSTIC_NAMES` entries as sent (chosen: duplicates count,
so the work per request is bounded before anything else is looked at); the names are then de-duplicated in their
first order, so each queue is checked once (5,000 copies of one name used to cost 5,000 checks).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import naming
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import context_of
from asya_gateway.diagnostic import QueueDiagnostic, diagnostic_actors
from asya_gateway.errors import HttpError
from asya_gateway.openapi import openapi_document
from asya_gateway.requestmodels import DiagnosticRequest, parse_body
from asya_gateway.version import VERSION

__all__ = ["health", "mq_diagnostic", "openapi"]


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": VERSION})


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(context_of(request).manifest, version=VERSION))


async def mq_diagnostic(request: Request) -> Response:
    """Optional body ``{"actors": [name, ...]}``; default every actor of the manifest, crew and aggregators included."""
    ctx = context_of(request)
    body = parse_body(DiagnosticRequest, await read_json_object(request, limit=CREATE_BODY_LIMIT))
    known = diagnostic_actors(ctx.manifest)
    actors = known if body.actors is None else list(dict.fromkeys(body.actors))
    declared = set(known) | naming.FIXED_CREW
    for name in actors:
        # an undeclared name is reported (declared: false): its queue may be one a removed actor left (GW-OPS-5)
        if name not in declared and not naming.is_valid_actor_name(name):
            raise HttpError(400, f"actors: {name!r} is not an actor name (actors: {', '.join(sorted(declared))})")
    diagnostic = QueueDiagnostic(
        namespace=ctx.manifest.namespace,
        sqs=ctx.transport.sqs,
        clock=ctx.clock,
        cloudwatch=ctx.cloudwatch,
        use_cloudwatch=ctx.config.in_lambda,
    )
    return JSONResponse(await ctx.call(diagnostic.check, actors, declared=declared))
