"""The gateway ASGI application (docs/http.md).

``create_app()`` is the factory: uvicorn calls it with no arguments (``uvicorn asya_gateway.app:create_app --factory``,
``run.sh`` under the AWS Lambda Web Adapter), and it then reads :class:`GatewayConfig` from ``os.environ`` and the
manifest from ``ASYA_MANIFEST``. The local mode passes an already-loaded manifest and boto3 clients pointed at moto.
Nothing is read or created at import time; boto3 clients are created on first use when not injected.

Routes (GW-GEN table): ``POST``/``GET`` ``/api/v1/mesh`` and ``/api/v1/mesh/`` (create, list), ``GET``/``DELETE``
``/api/v1/mesh/{id}``, ``GET``/``POST`` ``/api/v1/mesh/{id}/events``, ``POST /api/v1/system/mq-diagnostic``,
``GET /api/v1/system/mesh`` (the manifest's flows and actors, :mod:`asya_gateway.routes.system`), ``POST
/api/v1/system/dlq/{actor}/redrive`` (:mod:`asya_gateway.redrive`), ``GET
/api/v1/mesh/{id}/history`` and ``POST /api/v1/mesh/{id}/retry`` (:mod:`asya_gateway.routes.history`), ``GET /health``,
``GET /openapi.json``, the web console at ``/console/`` (:mod:`asya_gateway.webconsole`), MCP ``POST``/``DELETE
/mcp`` (GW-MCP-1..9, :mod:`asya_gateway.mcp`), A2A ``POST /a2a/`` and the agent card at ``GET
/.well-known/agent-card.json`` and ``/.well-known/agent.json`` (GW-A2A-1..14, :mod:`asya_gateway.a2a`). Middleware,
outermost first: request id + access log + last-resort 500 (GW-GEN-4), the head's size bound outside Lambda
(GW-GEN-10, 431), CORS when ``gateway.cors_origins`` is set
(GW-GEN-8), authentication (GW-AUTH-1..7). Errors are ``{"error": msg}`` (GW-GEN-2, GW-GEN-3).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount, Route

from asya import naming
from asya.awsclients import GATEWAY_BUDGET
from asya.manifest import Manifest, load_manifest
from asya.payloads import PayloadStore
from asya.programstore import ProgramStore
from asya.store import TaskStore
from asya.timeutil import Clock, system_clock
from asya.transport import Transport
from asya_gateway.a2a import CARD_PATHS, a2a_endpoint, agent_card
from asya_gateway.admission import Admission
from asya_gateway.auth import AuthMiddleware, build_authenticator, build_reporter_authenticator
from asya_gateway.bodytimeout import BodyTimeoutMiddleware
from asya_gateway.config import GatewayConfig
from asya_gateway.context import GatewayContext
from asya_gateway.errors import HttpError, http_error_handler, starlette_http_exception_handler
from asya_gateway.headerlimit import MAX_HEAD_BYTES, HeaderLimitMiddleware
from asya_gateway.logs import configure_logging
from asya_gateway.mcp import mcp_endpoint
from asya_gateway.redrive import redrive_dlq
from asya_gateway.requestid import RequestIdMiddleware
from asya_gateway.routes.events import task_events
from asya_gateway.routes.history import retry_task, task_history
from asya_gateway.routes.ops import health, mq_diagnostic, openapi
from asya_gateway.routes.resume import resume_task
from asya_gateway.routes.signal import signal_task
from asya_gateway.routes.system import mesh_summary
from asya_gateway.routes.tasks import create_or_list, task_item
from asya_gateway.routes.watch import watch_events
from asya_gateway.timers import DeadlineTimers
from asya_gateway.webconsole import CONSOLE_PATH, ConsoleAssets, console_redirect

__all__ = ["create_app", "drain"]


def _routes() -> list[Route | Mount]:
    return [
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/api/v1/mesh", create_or_list, methods=["GET", "POST"]),
        Route("/api/v1/mesh/", create_or_list, methods=["GET", "POST"]),
        # GET only: DELETE /api/v1/mesh/events falls through to the task whose id is "events" (GW-GEN-7)
        Route("/api/v1/mesh/events", watch_events, methods=["GET"]),
        Route("/api/v1/mesh/{task_id}", task_item, methods=["GET", "DELETE"]),
        Route("/api/v1/mesh/{task_id}/events", task_events, methods=["GET", "POST"]),
        Route("/api/v1/mesh/{task_id}/resume", resume_task, methods=["POST"]),
        Route("/api/v1/mesh/{task_id}/signal", signal_task, methods=["POST"]),
        Route("/api/v1/mesh/{task_id}/history", task_history, methods=["GET"]),
        Route("/api/v1/mesh/{task_id}/retry", retry_task, methods=["POST"]),
        Route("/api/v1/system/mq-diagnostic", mq_diagnostic, methods=["POST"]),
        Route("/api/v1/system/mesh", mesh_summary, methods=["GET"]),
        Route("/api/v1/system/dlq/{actor}/redrive", redrive_dlq, methods=["POST"]),
        Route(CONSOLE_PATH, console_redirect, methods=["GET"]),
        Mount(CONSOLE_PATH, app=ConsoleAssets()),
        Route("/mcp", mcp_endpoint, methods=["POST", "DELETE"]),
        Route("/a2a/", a2a_endpoint, methods=["POST"]),
        Route("/a2a", a2a_endpoint, methods=["POST"]),
        *(Route(path, agent_card, methods=["GET"]) for path in CARD_PATHS),
    ]


def create_app(
    config: GatewayConfig | None = None,
    *,
    manifest: Manifest | None = None,
    store: TaskStore | None = None,
    transport: Transport | None = None,
    timers: DeadlineTimers | None = None,
    sqs: Any = None,
    dynamodb: Any = None,
    s3: Any = None,
    secretsmanager: Any = None,
    cloudwatch: Any = None,
    clock: Clock | None = None,
) -> Starlette:
    """Build the gateway. Every argument is optional; what is missing is built from ``config`` and the manifest it
    names. Without ``config`` (the uvicorn factory path) the configuration is read from ``os.environ`` and the
    ``asya_gateway`` loggers write JSON lines to stdout."""
    if config is None:
        configure_logging()
        config = GatewayConfig.from_env()
    manifest = manifest if manifest is not None else load_manifest(config.manifest_path)
    clock = clock if clock is not None else system_clock
    bucket = config.bucket or naming.bucket_name(manifest.namespace)
    if store is None:
        store = TaskStore(
            table=config.table or manifest.table_name,
            bucket=bucket,
            dynamodb=dynamodb,
            s3=s3,
            clock=clock,
            index_shards=config.index_shards,
            budget=GATEWAY_BUDGET,
        )
    payloads = PayloadStore(
        bucket=bucket, threshold_kb=manifest.storage.offload_threshold_kb, s3=s3, budget=GATEWAY_BUDGET
    )
    if transport is None:
        # large payloads travel as S3 references (P-LARGE-2), like every other sender's
        transport = Transport(
            namespace=manifest.namespace,
            sqs=sqs,
            encoder=payloads.encode,
            account_id=config.account_id,
            budget=GATEWAY_BUDGET,
        )
    if timers is None:
        timers = DeadlineTimers(namespace=manifest.namespace, sqs=sqs, account_id=config.account_id, clock=clock)
    authenticator = build_authenticator(manifest.gateway.auth, config, secretsmanager=secretsmanager)
    middleware = [
        Middleware(RequestIdMiddleware, trust_request_context=config.in_lambda, retry_after=config.retry_after_seconds),
        # API Gateway bounds the head in AWS; locally the app does, with the same limit (GW-GEN-10)
        Middleware(HeaderLimitMiddleware, limit=None if config.in_lambda else MAX_HEAD_BYTES),
        Middleware(BodyTimeoutMiddleware, timeout=config.body_read_timeout),
    ]
    if manifest.gateway.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(manifest.gateway.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=[
                    "Authorization",
                    "Content-Type",
                    "Last-Event-ID",
                    "X-API-Key",
                    "traceparent",
                    "Mcp-Session-Id",
                    "MCP-Protocol-Version",
                    # sent with every MCP 2026-07-28 request
                    "Mcp-Method",
                    "Mcp-Name",
                ],
                # a browser MCP client must read the session id initialize answers
                expose_headers=["Location", "X-Request-Id", "Mcp-Session-Id", "Retry-After"],
            )
        )
    reporter = build_reporter_authenticator(config, secretsmanager=secretsmanager)
    middleware.append(Middleware(AuthMiddleware, authenticator=authenticator, reporter=reporter))
    app = Starlette(
        routes=_routes(),
        middleware=middleware,
        exception_handlers={HttpError: http_error_handler, HTTPException: starlette_http_exception_handler},
    )
    app.router.redirect_slashes = False
    app.state.gateway = GatewayContext(
        config=config,
        manifest=manifest,
        store=store,
        transport=transport,
        clock=clock,
        timers=timers,
        payloads=payloads,
        cloudwatch=cloudwatch,
        programs=ProgramStore(bucket=bucket, s3=s3),
        admission=(
            Admission(transport, config.admission_drain_rates, retry_after=config.retry_after_seconds)
            if config.admission_drain_rates
            else None
        ),
    )
    return app


def drain(app: Starlette) -> None:
    """Tell ``app`` its server is about to stop: its task event streams (``GET /api/v1/mesh/{id}/events``) end at
    their next poll (within ``sse_poll_slow`` seconds) instead of being cut by the server's shutdown, and their
    clients resume with ``Last-Event-ID`` on the next server. MCP and A2A waits are not ended early (their protocols
    cannot resume a call's response), and an MCP call cut by the shutdown does not cancel its task. Plain requests
    are the server's to drain (uvicorn's graceful shutdown). The local mode drains before it stops or restarts a
    gateway; in Lambda nothing stops an invocation early, so nothing calls this."""
    context = app.state.gateway
    assert isinstance(context, GatewayContext)
    context.draining.set()
