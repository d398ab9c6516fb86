"""``LocalMesh``: a whole mesh in one process (and moto's server in its child), from its manifest (docs/local.md).

Start order: moto's server on ``127.0.0.1`` in a child process (:class:`asya_local.moto_server.MotoServer`; not when
``endpoint_url`` points at an existing endpoint), the resources (:func:`asya_local.provision.provision`), one runtime
per deployed actor, one event source mapping emulator per actor, the deadline backstop
(:class:`asya_local.backstop_loop.BackstopLoop`, GW-BACK-1: the timers of ``x-deadline`` as they come due, and the
``long_deadlines`` sweep every ``backstop_interval`` seconds; ``None`` turns both off), the sweeper of queues an
earlier manifest left behind (:class:`asya_local.orphans.OrphanSweeper`: their envelopes fail their tasks through
x-sump, then the queues go), then the gateway ASGI app served by uvicorn on ``host:port`` (port 0 picks a free port;
``url`` tells which; with ``free_port_fallback`` a port already in use is replaced by a free one and ``port_was_busy``
says so). ``start()`` returns once ``GET /health`` answers 200. ``stop()`` first asks every poller to stop (an
invocation under way finishes; no new message is taken, so what waits in a queue is left whole to the next mesh,
whatever the gateway's shutdown takes), then stops the gateway, which drains (its SSE streams end cleanly and their
clients resume elsewhere) and gets 3 s for requests under way, then waits for the pollers, the sweeper and the
backstop.
``restart_gateway()`` replaces the gateway alone, on the same port (the chaos harness's gateway restart).

The gateway app gets the local route of :mod:`asya_local.devroutes`: a ``/health`` that answers 503 once moto's
process is gone (:meth:`LocalMesh.moto_problem`). With ``record_history`` (``asya dev`` sets it) the gateway gets
``ASYA_HISTORY_ALL_TASKS``, so every task's run history is recorded in the mesh's bucket and served by
``GET /api/v1/mesh/{id}/history``, as in AWS (P-HIST-10). With a :class:`~asya_local.reload.CodeWatcher`, user
actors' runtimes are rebuilt (their handler code imported afresh) before the first invocation after a code change.

Runtimes are the real Lambda entry points, picked by actor name (``asya.naming.CREW_ENTRY_POINTS``): ``x-sink`` ->
``asya_crew.sink.SinkRuntime``, ``x-sump`` -> ``asya_crew.sump.SumpRuntime``, ``x-pause`` ->
``asya_crew.pause.PauseRuntime``, ``x-resume`` -> ``asya_crew.resume.ResumeRuntime``, any other ->
``asya.sidecar.ActorRuntime``; each is built as
``Runtime(ActorConfig.from_env(env), sqs=, dynamodb=, s3=)`` where ``env`` holds exactly the variables the CDK app
sets on the Lambda (``asya_deploy.environment.actor_environment``), plus ``ASYA_CODE_DIR`` (in Lambda the code asset is
already importable) and, when ``actor_log_level`` is given, ``POWERTOOLS_LOG_LEVEL`` (``asya demo`` quiets the
actors' JSON logs this way; ``asya dev`` keeps them). The gateway gets ``asya_deploy.environment.gateway_environment``,
``capacity_environment`` (a declared target's ``Retry-After``, shard count and admission drain rates, as deployed)
and ``gateway_env``. With ``stage_throttle`` the gateway is served behind API Gateway's stage throttle of
``gateway.edge.throttle`` (:mod:`asya_local.stagethrottle`: 429 with ``Retry-After`` once its token bucket is empty).
The producer route takes a reporter key only (GW-EVT-1): each mesh makes a random one, gives it to the gateway
as ``ASYA_REPORTER_KEYS`` (``gateway_env`` may override it) and to every actor that reports over HTTP
(``ASYA_REPORTER=http`` or ``ASYA_GATEWAY_URL``) as ``ASYA_GATEWAY_REPORTER_KEY``, with ``ASYA_GATEWAY_URL`` defaulting
to ``gateway.callback_url`` (the key goes to that origin only). An actor's emulator runs ``max_concurrency`` pollers
(else ``concurrency``; at most 10), each with its own runtime, as Lambda runs concurrent invocations in separate
containers. Compiled flows too large for the environment (``asya.flowfile``) are written to a temporary
``asya_flows.json`` for the mesh's life and named by ``ASYA_FLOWS_FILE``, as the CDK app ships them in a layer. Nothing
here knows the mesh is local except the clients' endpoint.
"""

from __future__ import annotations

import functools
import importlib
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

import httpx

from asya import naming
from asya.config import ENV, LOG_LEVEL_ENV, REPORTER_ENV, ActorConfig
from asya.flowfile import FLOWS_FILE_NAME
from asya.manifest import HISTORY_BODY_DEFAULT, DeployedActor, Manifest
from asya_deploy.environment import actor_environment, capacity_environment, flows_file_text, gateway_environment
from asya_local.backstop_loop import DEFAULT_BACKSTOP_INTERVAL, BackstopLoop
from asya_local.devroutes import install_dev_routes
from asya_local.esm import EsmConfig, EventSourceMapping, Handler
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from asya_local.lifecycle import MeshLifecycle
from asya_local.moto_server import DEFAULT_REGION, MOTO_ACCOUNT_ID, AwsClients, MotoServer, make_clients
from asya_local.orphans import OrphanSweeper
from asya_local.provision import MeshResources, provision
from asya_local.reload import CodeWatcher, ReloadingHandler
from asya_local.serving import UvicornThread
from asya_local.stagethrottle import StageThrottleMiddleware

__all__ = ["ActorRuntimeLike", "LocalMesh", "runtime_entry_point", "runtime_environment"]

_HEALTH_POLL_SECONDS: Final = 0.05
#: How long a stopping gateway lets open requests (SSE streams) run before it cancels them.
_GRACE_SECONDS: Final = 3
#: Pollers per actor at most: an actor's ``max_concurrency`` (else the mesh's ``concurrency``) up to this many.
_MAX_WORKERS: Final = 10


class ActorRuntimeLike(Protocol):
    def handle(self, event: dict[str, Any], context: LambdaContext) -> Any: ...


def runtime_entry_point(actor: str) -> tuple[str, str]:
    """``(module, class)`` of the Lambda runtime that serves ``actor``."""
    entry = naming.entry_point(actor)
    return entry.module, entry.runtime


def runtime_environment(
    manifest: Manifest,
    actor: DeployedActor,
    resources: MeshResources,
    *,
    log_level: str | None = None,
    flows_file: str | None = None,
) -> dict[str, str]:
    """The environment the local mode builds ``actor``'s runtime from: the deployed Lambda's, plus the code directory
    and an optional log level override; ``flows_file``, the mesh's flows file (``asya.flowfile``) when it has one."""
    env = actor_environment(
        manifest,
        actor,
        table=resources.table,
        bucket=resources.bucket,
        code_dir=actor.code_dir,
        flows_file=flows_file,
    )
    if log_level:
        env[LOG_LEVEL_ENV[0]] = log_level
    return env


class LocalMesh(MeshLifecycle):
    """The mesh of ``manifest`` running in this process. Use as a context manager or call ``start``/``stop``."""

    def __init__(
        self,
        manifest: Manifest,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        endpoint_url: str | None = None,
        region: str = DEFAULT_REGION,
        concurrency: int = 1,
        poll_wait_seconds: int = 1,
        gateway_env: Mapping[str, str] | None = None,
        actor_log_level: str | None = None,
        free_port_fallback: bool = False,
        backstop_interval: float | None = DEFAULT_BACKSTOP_INTERVAL,
        startup_timeout: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        record_history: bool = False,
        watcher: CodeWatcher | None = None,
        moto_problem: Callable[[], str | None] | None = None,
        stage_throttle: bool = False,
    ) -> None:
        if concurrency < 1:
            raise LocalModeError(f"concurrency must be >= 1, got {concurrency!r}")
        if backstop_interval is not None and not backstop_interval > 0:
            raise LocalModeError(f"backstop_interval must be > 0 seconds or None, got {backstop_interval!r}")
        if (problem := naming.undeployed_crew(manifest.crew_targets()) or manifest.missing_code_dir()) is not None:
            raise LocalModeError(problem)
        self.manifest = manifest
        self._host = host
        self._port = port
        self._endpoint_url = endpoint_url
        self._region = region
        self._concurrency = concurrency
        self._poll_wait_seconds = poll_wait_seconds
        self._gateway_env = dict(gateway_env or {})
        self._reporter_key = secrets.token_urlsafe(24)
        self._actor_log_level = actor_log_level
        self._free_port_fallback = free_port_fallback
        self._backstop_interval = backstop_interval
        self._startup_timeout = startup_timeout
        self._monotonic = monotonic
        self._record_history = record_history
        self._watcher = watcher
        self._moto_problem = moto_problem
        self._stage_throttle = stage_throttle
        self._moto: MotoServer | None = None
        self._flows_dir: tempfile.TemporaryDirectory[str] | None = None
        self._flows_file: str | None = None
        self._clients: AwsClients | None = None
        self._resources: MeshResources | None = None
        self._esms: dict[str, EventSourceMapping] = {}
        self._gateway: UvicornThread | None = None
        self._backstop: BackstopLoop | None = None
        self._orphans: OrphanSweeper | None = None

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The gateway's base URL, e.g. ``http://127.0.0.1:8080``."""
        return self._require(self._gateway).url

    @property
    def port_was_busy(self) -> bool:
        """True when the requested port was in use and ``free_port_fallback`` picked a free one instead."""
        return self._gateway is not None and self._gateway.port_was_busy

    @property
    def endpoint_url(self) -> str:
        """The AWS endpoint (moto) every client of the mesh talks to."""
        endpoint = self.clients.endpoint_url
        assert endpoint is not None
        return endpoint

    @property
    def moto_pid(self) -> int | None:
        """The process id of the mesh's own moto server (``None`` when ``endpoint_url`` named another endpoint)."""
        return self._moto.pid if self._moto is not None else None

    def moto_problem(self) -> str | None:
        """``None`` while the mesh's moto server runs; else why not. The mesh checks its own server; with another
        endpoint, the ``moto_problem`` it was given (``None``: no check)."""
        if self._moto is not None:
            return self._moto.problem()
        return self._moto_problem() if self._moto_problem is not None else None

    @property
    def backstop(self) -> BackstopLoop | None:
        """The deadline backstop loop (``None`` before start or when ``backstop_interval`` is ``None``)."""
        return self._backstop

    @property
    def clients(self) -> AwsClients:
        return self._require(self._clients)

    @property
    def resources(self) -> MeshResources:
        return self._require(self._resources)

    @property
    def esms(self) -> Mapping[str, EventSourceMapping]:
        return dict(self._esms)

    # -- lifecycle (start() and the context manager: asya_local.lifecycle) --------------------------------------

    @property
    def running(self) -> bool:
        return self._gateway is not None

    def _start(self) -> None:
        endpoint = self._endpoint_url
        if endpoint is None:
            self._moto = MotoServer(host="127.0.0.1", port=0)
            self._moto.start()
            endpoint = self._moto.endpoint_url
        clients = make_clients(endpoint, region=self._region)
        self._clients = clients
        resources = provision(
            self.manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3, region=self._region
        )
        self._resources = resources
        flows = flows_file_text(self.manifest)
        if flows is not None:
            # programs too large for the environment travel as a file, as the CDK app ships them (asya.flowfile)
            self._flows_dir = tempfile.TemporaryDirectory(prefix="asya-flows-")
            path = Path(self._flows_dir.name) / FLOWS_FILE_NAME
            path.write_text(flows, encoding="utf-8")
            self._flows_file = str(path)
        for actor in self.manifest.deployed_actors():
            # Lambda scales an SQS event source up to the actor's max_concurrency: as many local pollers (capped)
            workers = min(actor.max_concurrency or self._concurrency, _MAX_WORKERS)
            # one runtime per concurrent invocation, as Lambda runs them in separate containers
            new_handler = functools.partial(self._runtime_handler, actor, resources, clients)
            esm = EventSourceMapping(
                EsmConfig(
                    function_name=self.manifest.queue_name(actor.name),
                    queue_url=resources.queue_urls[actor.name],
                    batch_size=actor.batch_size,
                    max_concurrency=workers,
                    lambda_timeout=actor.lambda_timeout,
                    memory_mb=actor.memory,
                    wait_seconds=self._poll_wait_seconds,
                    region=self._region,
                ),
                new_handler(),
                sqs=clients.sqs,
                monotonic=self._monotonic,
                new_handler=new_handler,
            )
            self._esms[actor.name] = esm
            esm.start()
        if self._backstop_interval is not None:
            self._backstop = self._build_backstop(resources, clients, self._backstop_interval)
            self._backstop.start()
        # the queues of actors an earlier manifest declared: their envelopes fail their tasks now (LOCAL-ORPHAN-1)
        self._orphans = OrphanSweeper(
            namespace=self.manifest.namespace,
            sqs=clients.sqs,
            provisioned=[*resources.queue_urls.values(), *resources.dlq_urls.values()],
        )
        self._orphans.start()
        app = self._build_gateway(resources, clients)
        gateway = UvicornThread(
            app,
            host=self._host,
            port=self._port,
            name="asya-gateway",
            label="the gateway",
            grace_seconds=_GRACE_SECONDS,
            fallback=self._free_port_fallback,
        )
        self._gateway = gateway
        gateway.start(self._startup_timeout)
        _wait_healthy(gateway, self._startup_timeout)

    def stop(self) -> None:
        # the pollers first: during the gateway's grace they would take waiting messages and run them on this
        # manifest, which a restart is replacing (LOCAL-ORPHAN-1); every worker winds down at once, the joins overlap
        for esm in self._esms.values():
            esm.request_stop()
        if self._gateway is not None:
            _stop_gateway(self._gateway)
            self._gateway = None
        errors = []
        for esm in self._esms.values():
            try:
                esm.stop(timeout=self._startup_timeout)
            except LocalModeError as exc:
                errors.append(str(exc))
        self._esms.clear()
        if self._orphans is not None:
            self._orphans.stop()
            self._orphans = None
        if self._backstop is not None:
            try:
                self._backstop.stop(timeout=self._startup_timeout)
            except LocalModeError as exc:
                errors.append(str(exc))
            self._backstop = None
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        self._clients = None
        self._resources = None
        if self._flows_dir is not None:
            self._flows_dir.cleanup()
            self._flows_dir, self._flows_file = None, None
        if errors:
            raise LocalModeError("; ".join(errors))

    def restart_gateway(self, *, grace_seconds: int = _GRACE_SECONDS) -> None:
        """Stop the gateway and serve a freshly built one on the same port. The old app drains
        (:func:`asya_gateway.app.drain`: its SSE streams end at their next poll), requests under way get
        ``grace_seconds`` to finish (what is still open then is cut), connections are refused until the new app
        answers ``/health``, and SSE clients resume with ``Last-Event-ID``. Everything else (moto, pollers, backstop)
        keeps running."""
        old = self._gateway
        if old is None or self._resources is None or self._clients is None:
            raise LocalModeError("the mesh is not running: call start() first")
        host, port = old.bound
        _stop_gateway(old, grace_seconds=grace_seconds)
        self._gateway = None
        gateway: UvicornThread | None = None
        try:
            gateway = UvicornThread(
                self._build_gateway(self._resources, self._clients),
                host=host,
                port=port,
                name="asya-gateway",
                label="the gateway",
                grace_seconds=_GRACE_SECONDS,
            )
            gateway.start(self._startup_timeout)
            _wait_healthy(gateway, self._startup_timeout)
        except LocalModeError as exc:
            if gateway is not None:
                _stop_gateway(gateway)
            raise LocalModeError(
                f"the gateway did not come back on {host}:{port} after a restart ({exc}); the actors and moto still "
                "run: stop() the mesh"
            ) from None
        self._gateway = gateway

    # -- parts -----------------------------------------------------------------------------------------------

    def _runtime_handler(self, actor: DeployedActor, resources: MeshResources, clients: AwsClients) -> Handler:
        def build() -> Handler:
            return self._build_runtime(actor, resources, clients).handle

        if self._watcher is None or actor.crew:
            return build()
        return ReloadingHandler(build, self._watcher)

    def _account_env(self) -> dict[str, str]:
        """``ASYA_ACCOUNT_ID`` when the mesh runs its own moto (whose account is fixed), so queue URLs are built as in
        AWS; another endpoint keeps ``GetQueueUrl``."""
        return {ENV.account_id: MOTO_ACCOUNT_ID} if self._moto is not None else {}

    def _reporter_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The mesh's reporter key for an actor that reports over HTTP and names no key of its own (GW-EVT-1)."""
        mode_name, url_name, _, key_name = REPORTER_ENV
        url = env.get(url_name, "").strip()
        if (env.get(mode_name, "").strip().lower() != "http" and not url) or env.get(key_name):
            return {}
        callback = self.manifest.gateway.callback_url
        url = url or ("" if callback is None else str(callback))
        return {url_name: url, key_name: self._reporter_key} if url else {}

    def _build_runtime(self, actor: DeployedActor, resources: MeshResources, clients: AwsClients) -> ActorRuntimeLike:
        module_name, class_name = runtime_entry_point(actor.name)
        try:
            runtime_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise LocalModeError(f"actors.{actor.name}: cannot load runtime {module_name}.{class_name}: {exc}") from exc
        env = runtime_environment(
            self.manifest, actor, resources, log_level=self._actor_log_level, flows_file=self._flows_file
        )
        config = ActorConfig.from_env({**env, **self._account_env(), **self._reporter_env(env)})
        runtime: ActorRuntimeLike = runtime_class(config, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)
        return runtime

    def _build_backstop(self, resources: MeshResources, clients: AwsClients, interval: float) -> BackstopLoop:
        from asya.store import TaskStore
        from asya_gateway.backstop import Backstop
        from asya_gateway.timers import DeadlineTimers

        namespace = self.manifest.namespace
        store = TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=clients.dynamodb, s3=clients.s3)
        timers = DeadlineTimers(
            namespace=namespace, sqs=clients.sqs, account_id=self._account_env().get(ENV.account_id)
        )
        return BackstopLoop(
            Backstop(store, namespace=namespace, timers=timers, metric=None),
            queue_url=resources.queue_urls[naming.DEADLINE],
            sqs=clients.sqs,
            region=self._region,
            interval=interval,
            wait_seconds=self._poll_wait_seconds,
        )

    def _build_gateway(self, resources: MeshResources, clients: AwsClients) -> Any:
        from asya_gateway.app import create_app
        from asya_gateway.config import GATEWAY_ENV, GatewayConfig

        env = {
            **gateway_environment(table=resources.table, bucket=resources.bucket),
            **capacity_environment(self.manifest),
            **self._account_env(),
            GATEWAY_ENV.reporter_keys: self._reporter_key,
            **({GATEWAY_ENV.history_all_tasks: str(HISTORY_BODY_DEFAULT)} if self._record_history else {}),
            **self._gateway_env,
        }
        config = GatewayConfig.from_env(env)
        app = create_app(config, manifest=self.manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)
        install_dev_routes(app, moto_problem=self.moto_problem)
        if self._stage_throttle:  # API Gateway's stage throttle, played in front of the app (GW-OVL-6)
            return StageThrottleMiddleware(app, self.manifest.gateway.edge, retry_after=config.retry_after_seconds)
        return app


def _wait_healthy(gateway: UvicornThread, timeout: float) -> None:
    """Until the gateway's ``/health`` answers 200: the app's own view (moto reachable), not just uvicorn serving."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:
        while True:
            try:
                if client.get(f"{gateway.url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if not gateway.is_alive():
                raise LocalModeError(f"the gateway at {gateway.url} stopped during startup")
            if time.monotonic() > deadline:
                raise LocalModeError(f"the gateway at {gateway.url} did not answer /health within {timeout} s")
            time.sleep(_HEALTH_POLL_SECONDS)


def _stop_gateway(gateway: UvicornThread, *, grace_seconds: int = _GRACE_SECONDS) -> None:
    from asya_gateway.app import drain

    drain(gateway.app)  # SSE streams end at their next poll, within the grace period, and their clients resume
    gateway.stop(grace_seconds=grace_seconds)
