"""The route the local mode adds to the gateway app it serves (never deployed):

``GET /health`` replaces the gateway's liveness answer (GW-OPS-1) with one that also checks moto, whose child process
holds every queue, table and object of the mesh: 200 ``{"status": "ok", "version"}`` while moto runs, 503
``{"status": "unavailable", "version", "error": "<why>"}`` once it is gone (a dead moto would make every other call
answer 500). Still public, as the gateway's is (GW-AUTH-2).

The route is put in front of the gateway's own, so it goes through its middleware (request ids, access log) as every
route does. The run history is not a local route: ``asya dev`` records every task in S3 (P-HIST-10) and the gateway's
own ``GET /api/v1/mesh/{id}/history`` serves it, with the owner check of every task route.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from asya_gateway.version import VERSION

__all__ = ["DEV_ROUTE_OWNERS", "install_dev_routes"]

#: How each local route keeps one subject's tasks from another (GW-EDGE-8, the kinds of ``asya_gateway.ownership``):
#: the routes are not in the deployed OpenAPI document, so they are declared here.
DEV_ROUTE_OWNERS: Final[Mapping[tuple[str, str], str]] = {("/health", "get"): "public"}


def install_dev_routes(app: Any, *, moto_problem: Callable[[], str | None]) -> None:
    """Put the local routes in front of ``app``'s (a Starlette app that has not served a request yet).
    ``moto_problem`` answers ``None`` while moto is healthy, else why it is not."""

    async def health(request: Request) -> Response:
        problem = moto_problem()
        if problem is None:
            return JSONResponse({"status": "ok", "version": VERSION})
        return JSONResponse({"status": "unavailable", "version": VERSION, "error": problem}, status_code=503)

    app.router.routes[0:0] = [Route("/health", health, methods=["GET"])]
