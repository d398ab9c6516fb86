"""``LocalMesh``: a whole mesh in one process, from its manifest (DESIGN section 1, "Locally").

Start order: moto's server on ``127.0.0.1`` (unless ``endpoint_url`` points at an existing endpoint), the resources
(:func:`asya_local.provision.provision`), one runtime per deployed actor, one event source mapping emulator per actor,
then the gateway ASGI app served by uvicorn on ``host:port`` (port 0 picks a free port; ``url`` tells which).
``start()`` returns once ``GET /health`` answers 200. ``stop()`` undoes it in reverse order.

Runtimes are the real Lambda entry points, picked by actor name: ``x-sink`` -> ``asya_crew.sink.SinkRuntime``,
``x-sump`` -> ``asya_crew.sump.SumpRuntime``, any other -> ``asya.sidecar.ActorRuntime``; each is built as
``Runtime(ActorConfig.from_env(env), sqs=, dynamodb=, s3=)`` where ``env`` holds exactly the variables the CDK app
sets on the Lambda (:func:`actor_environment`). Nothing here knows the mesh is local except the clients' endpoint.
"""

from __future__ import annotations

import importlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol

import httpx

from asya import naming
from asya.config import ENV, ActorConfig
from asya.manifest import DeployedActor, Manifest
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from asya_local.moto_server import DEFAULT_REGION, AwsClients, MotoServer, make_clients
from asya_local.provision import MeshResources, provision

__all__ = ["RUNTIME_ENTRY_POINTS", "ActorRuntimeLike", "LocalMesh", "actor_environment", "runtime_entry_point"]

#: Lambda entry classes by actor name; every other actor runs the sidecar.
RUNTIME_ENTRY_POINTS: Final[Mapping[str, tuple[str, str]]] = {
    naming.SINK: ("asya_crew.sink", "SinkRuntime"),
    naming.SUMP: ("asya_crew.sump", "SumpRuntime"),
}
_SIDECAR_ENTRY: Final = ("asya.sidecar", "ActorRuntime")
_HEALTH_POLL_SECONDS: Final = 0.05


class ActorRuntimeLike(Protocol):
    def handle(self, event: dict[str, Any], context: LambdaContext) -> Any: ...


def runtime_entry_point(actor: str) -> tuple[str, str]:
    """``(module, class)`` of the Lambda runtime that serves ``actor``."""
    return RUNTIME_ENTRY_POINTS.get(actor, _SIDECAR_ENTRY)


def actor_environment(manifest: Manifest, actor: DeployedActor, resources: MeshResources) -> dict[str, str]:
    """The environment of ``actor``'s Lambda: its manifest ``env`` map, then the ``ASYA_*`` variables (which win)."""
    env = dict(actor.env)
    env.update(
        {
            ENV.namespace: manifest.namespace,
            ENV.actor: actor.name,
            ENV.handler: actor.handler or "",
            ENV.code_dir: str(actor.code_dir) if actor.code_dir is not None else "",
            ENV.table: resources.table,
            ENV.bucket: resources.bucket,
            ENV.actor_timeout: _number(actor.timeout),
            ENV.offload_threshold_kb: str(manifest.storage.offload_threshold_kb),
        }
    )
    if actor.name == naming.SINK:
        env[ENV.sink_hooks] = ",".join(manifest.crew.sink_hooks)
    if actor.resiliency is not None:
        env[ENV.resiliency] = json.dumps(actor.resiliency.model_dump(mode="json"), separators=(",", ":"))
    return env


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class LocalMesh:
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
        startup_timeout: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if concurrency < 1:
            raise LocalModeError(f"concurrency must be >= 1, got {concurrency!r}")
        self.manifest = manifest
        self._host = host
        self._port = port
        self._endpoint_url = endpoint_url
        self._region = region
        self._concurrency = concurrency
        self._poll_wait_seconds = poll_wait_seconds
        self._gateway_env = dict(gateway_env or {})
        self._startup_timeout = startup_timeout
        self._monotonic = monotonic
        self._moto: MotoServer | None = None
        self._clients: AwsClients | None = None
        self._resources: MeshResources | None = None
        self._esms: dict[str, EventSourceMapping] = {}
        self._gateway: _UvicornThread | None = None

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The gateway's base URL, e.g. ``http://127.0.0.1:8080``."""
        if self._gateway is None:
            raise LocalModeError("the mesh is not running: call start() first")
        return self._gateway.url

    @property
    def clients(self) -> AwsClients:
        if self._clients is None:
            raise LocalModeError("the mesh is not running: call start() first")
        return self._clients

    @property
    def resources(self) -> MeshResources:
        if self._resources is None:
            raise LocalModeError("the mesh is not running: call start() first")
        return self._resources

    @property
    def esms(self) -> Mapping[str, EventSourceMapping]:
        return dict(self._esms)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._gateway is not None:
            return
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

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
        for actor in self.manifest.deployed_actors():
            runtime = self._build_runtime(actor, resources, clients)
            workers = (
                self._concurrency if actor.max_concurrency is None else min(self._concurrency, actor.max_concurrency)
            )
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
                runtime.handle,
                sqs=clients.sqs,
                monotonic=self._monotonic,
            )
            self._esms[actor.name] = esm
            esm.start()
        app = self._build_gateway(resources, clients)
        gateway = _UvicornThread(app, host=self._host, port=self._port)
        self._gateway = gateway
        gateway.start()
        gateway.wait_healthy(self._startup_timeout)

    def stop(self) -> None:
        if self._gateway is not None:
            self._gateway.stop()
            self._gateway = None
        errors = []
        for esm in self._esms.values():
            esm.request_stop()  # every worker winds down at once; the joins below then overlap
        for esm in self._esms.values():
            try:
                esm.stop(timeout=self._startup_timeout)
            except LocalModeError as exc:
                errors.append(str(exc))
        self._esms.clear()
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        self._clients = None
        self._resources = None
        if errors:
            raise LocalModeError("; ".join(errors))

    def __enter__(self) -> LocalMesh:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- parts -----------------------------------------------------------------------------------------------

    def _build_runtime(self, actor: DeployedActor, resources: MeshResources, clients: AwsClients) -> ActorRuntimeLike:
        module_name, class_name = runtime_entry_point(actor.name)
        try:
            runtime_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise LocalModeError(f"actors.{actor.name}: cannot load runtime {module_name}.{class_name}: {exc}") from exc
        config = ActorConfig.from_env(actor_environment(self.manifest, actor, resources))
        runtime: ActorRuntimeLike = runtime_class(config, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)
        return runtime

    def _build_gateway(self, resources: MeshResources, clients: AwsClients) -> Any:
        from asya_gateway.app import create_app
        from asya_gateway.config import GatewayConfig

        env = {"ASYA_TABLE": resources.table, "ASYA_BUCKET": resources.bucket, **self._gateway_env}
        config = GatewayConfig.from_env(env)
        return create_app(config, manifest=self.manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)


class _UvicornThread:
    """uvicorn serving an ASGI app from a daemon thread, on a socket bound before the thread starts."""

    def __init__(self, app: Any, *, host: str, port: int) -> None:
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise LocalModeError(f"cannot serve the gateway on {host}:{port}: {exc.strerror}") from None
        bound_host, bound_port = self._socket.getsockname()[:2]
        self.url = f"http://{bound_host}:{bound_port}"
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, timeout_graceful_shutdown=3
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="asya-gateway", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if not self._thread.is_alive():
                    raise LocalModeError(f"the gateway at {self.url} stopped during startup")
                if time.monotonic() > deadline:
                    raise LocalModeError(f"the gateway at {self.url} did not answer /health within {timeout} s")
                time.sleep(_HEALTH_POLL_SECONDS)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(10)
        self._socket.close()
