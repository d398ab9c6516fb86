"""Routes the local mode adds to the gateway app it serves (never deployed):

- ``GET /health`` replaces the gateway's liveness answer (GW-OPS-1) with one that also checks moto, whose child
  process holds every queue, table and object of the mesh: 200 ``{"status": "ok", "version"}`` while moto runs, 503
  ``{"status": "unavailable", "version", "error": "<why>"}`` once it is gone (a dead moto would make every other
  call answer 500). Still public, as the gateway's is (GW-AUTH-2).
- ``GET /api/v1/dev/history/{task_id}``: the local run history (:mod:`asya_local.history`), 404
  ``{"error": "not found"}`` for an id it does not know. Behind the gateway's authentication like every non-public
  route, and under ``owner_only`` its owner check (GW-EDGE-7): another subject's task is an unknown id.

The routes are put in front of the gateway's own, so they go through its middleware (request ids, access log,
authentication) as every route does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from asya_gateway.context import context_of
from asya_gateway.errors import HttpError
from asya_gateway.principal import owner_checks
from asya_gateway.routes.tasks import load_view
from asya_gateway.version import VERSION
from asya_local.history import HISTORY_PATH, RunHistory

__all__ = ["DEV_ROUTE_OWNERS", "install_dev_routes"]

#: How each local route keeps one subject's tasks from another (GW-EDGE-8, the kinds of ``asya_gateway.ownership``):
#: the routes are not in the deployed OpenAPI document, so they are declared here.
DEV_ROUTE_OWNERS: Final[Mapping[tuple[str, str], str]] = {("/health", "get"): "public", (HISTORY_PATH, "get"): "task"}


def install_dev_routes(app: Any, *, moto_problem: Callable[[], str | None], history: RunHistory | None) -> None:
    """Put the local routes in front of ``app``'s (a Starlette app that has not served a request yet).
    ``moto_problem`` answers ``None`` while moto is healthy, else why it is not."""

    async def health(request: Request) -> Response:
        problem = moto_problem()
        if problem is None:
            return JSONResponse({"status": "ok", "version": VERSION})
        return JSONResponse({"status": "unavailable", "version": VERSION, "error": problem}, status_code=503)

    routes = [Route("/health", health, methods=["GET"])]
    if history is not None:
        recorded = history

        async def run_history(request: Request) -> Response:
            task_id = str(request.path_params["task_id"])
            ctx = context_of(request)
            if owner_checks(ctx.manifest.gateway.auth):
                try:  # another subject's task is an unknown id here too (GW-EDGE-7)
                    await load_view(ctx, task_id)
                except HttpError:
                    return JSONResponse({"error": "not found"}, status_code=404)
            found = recorded.get(task_id)
            if found is None:
                return JSONResponse({"error": "not found"}, status_code=404)
            return JSONResponse(found)

        routes.append(Route(HISTORY_PATH, run_history, methods=["GET"]))
    app.router.routes[0:0] = routes
