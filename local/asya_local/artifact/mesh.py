"""``ArtifactMesh``: the mesh a cloud assembly (``cdk.out``) describes, run locally against moto.

Start order: moto's server (a child process); the IAM proxy in front of it when :mod:`asya_local.iam` is available
(each function's calls then go through it under the function's own credentials and role policies); the assembly's
resources (:mod:`~asya_local.artifact.provision`); the dependency layers restaged for this machine
(:mod:`~asya_local.artifact.restage`); one interpreter per function (:mod:`~asya_local.artifact.process`, more when
concurrent invocations need them) and, concurrently, each web function started as the Lambda Web Adapter starts it;
one event source mapping emulator per ``AWS::Lambda::EventSourceMapping`` (:class:`asya_local.esm.EventSourceMapping`,
polling with the function's credentials as Lambda polls with its role); one trigger per schedule rule (every
``schedule_interval`` seconds locally); the API front (:class:`~asya_local.artifact.apifront.ApiFront`) with the
template's methods; and a signing client of the test principal. ``url`` is that client's URL with the stage
(``.../prod``): plain HTTP requests to it reach the API signed, so a suite written against a gateway URL runs
unchanged. ``api_url`` is the API front itself (unsigned requests to ``AWS_IAM`` methods get 403 there).

``denied()`` lists every call refused: by the IAM proxy (a function's AWS call its role does not allow) and by the
API front (a request without a valid signature or permission).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from asya import naming
from asya_local.artifact.apifront import ApiFront, Principal, ServerThread, SigningClient
from asya_local.artifact.authorizers import EdgeAuthorizers
from asya_local.artifact.functions import FunctionPool, ScheduleTrigger
from asya_local.artifact.model import FunctionSpec, MeshSpec, read_mesh
from asya_local.artifact.process import Credentials, FunctionProcess, lambda_environment
from asya_local.artifact.provision import provision_spec
from asya_local.artifact.restage import Restager, is_dependency_layer
from asya_local.artifact.template import Assembly, load_assembly
from asya_local.artifact.webadapter import WebAdapterProcess
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from asya_local.lifecycle import MeshLifecycle
from asya_local.moto_server import DEFAULT_REGION, MOTO_ACCOUNT_ID, AwsClients, MotoServer, make_clients
from asya_local.provision import MeshResources

__all__ = ["DEFAULT_CACHE_DIR", "ArtifactMesh"]

_log = logging.getLogger(__name__)

#: Where restaged layers are kept between runs (relative to the working directory).
DEFAULT_CACHE_DIR: Final = Path(".asya/artifact-cache")
#: Concurrent pollers per mapping at most (a mapping's ``ScalingConfig.MaximumConcurrency`` is capped to it).
_MAX_POLLERS: Final = 2
#: The test principal that signs API requests.
TEST_PRINCIPAL: Final = "asya-artifact-tester"


class ArtifactMesh(MeshLifecycle):
    """The mesh of the assembly at ``cdk_out``. Use as a context manager or call ``start``/``stop``."""

    _kind = "the artifact mesh"

    def __init__(
        self,
        cdk_out: str | Path,
        *,
        cache_dir: Path | None = None,
        port: int = 0,
        region: str = DEFAULT_REGION,
        schedule_interval: float = 2.0,
        poll_wait_seconds: int = 1,
        log_dir: Path | None = None,
        iam: bool = True,
        transform_spec: Callable[[MeshSpec], MeshSpec] | None = None,
    ) -> None:
        self.cdk_out = Path(cdk_out).resolve()
        # absolute: the functions run from their own code directories
        self._cache_dir = (cache_dir or DEFAULT_CACHE_DIR).resolve()
        self._port = port
        self._region = region
        self._schedule_interval = schedule_interval
        self._poll_wait = poll_wait_seconds
        self._log_dir = log_dir
        self._iam_wanted = iam
        self._transform_spec = transform_spec
        self._moto: MotoServer | None = None
        self._proxy: Any = None
        self._clients: AwsClients | None = None
        self._assembly: Assembly | None = None
        self.spec: MeshSpec | None = None
        self._pools: dict[str, FunctionPool] = {}
        self._web: dict[str, WebAdapterProcess] = {}
        self._esms: list[EventSourceMapping] = []
        self._schedules: list[ScheduleTrigger] = []
        self._front: ApiFront | None = None
        #: the API's Lambda authorizers (their invocation counts), once started
        self.authorizers: EdgeAuthorizers | None = None
        self._servers: list[ServerThread] = []
        self._logs: list[IO[str]] = []
        self.credentials: dict[str, Credentials] = {}
        self._tester = Credentials.new("tester")
        self.startup_seconds: float | None = None
        self._url: str | None = None
        self._api_url: str | None = None
        self._function_endpoint = ""

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The test principal's signing client, with the stage: ``http://127.0.0.1:<port>/prod``."""
        return self._require(self._url)

    @property
    def api_url(self) -> str:
        """The API front itself, with the stage (``AWS_IAM`` methods need a signature here)."""
        return self._require(self._api_url)

    @property
    def clients(self) -> AwsClients:
        """The deployer's clients (straight to moto, no IAM check): for tests that inspect the state."""
        return self._require(self._clients)

    @property
    def endpoint_url(self) -> str:
        return self.clients.endpoint_url or ""

    @property
    def moto_pid(self) -> int | None:
        return self._moto.pid if self._moto is not None else None

    @property
    def resources(self) -> MeshResources:
        """Names by actor (``ASYA_ACTOR`` of the function an event source feeds; the backstop's timer queue under
        ``asya.naming.DEADLINE``), the table and the bucket: the shape :class:`asya_local.mesh.LocalMesh` offers."""
        spec = self._require_spec()
        namespace = next(
            (f.environment["ASYA_NAMESPACE"] for f in spec.functions.values() if "ASYA_NAMESPACE" in f.environment), ""
        )
        resources = MeshResources(
            namespace=namespace,
            table=spec.tables[0].name if spec.tables else "",
            bucket=spec.buckets[0].name if spec.buckets else "",
        )
        for source in spec.event_sources:
            actor = self._actor_of(spec.functions[source.function])
            queue = spec.queues[source.queue_arn]
            resources.queue_urls[actor] = f"{self.endpoint_url}/{MOTO_ACCOUNT_ID}/{queue.name}"
            redrive = json.loads(queue.attributes.get("RedrivePolicy", "{}"))
            dlq = spec.queues.get(redrive.get("deadLetterTargetArn", ""))
            if dlq is not None:
                resources.dlq_urls[actor] = f"{self.endpoint_url}/{MOTO_ACCOUNT_ID}/{dlq.name}"
        return resources

    @property
    def esms(self) -> dict[str, EventSourceMapping]:
        """The event source mapping emulators by actor (as :attr:`resources` names them)."""
        spec = self._require_spec()
        return {self._actor_of(spec.function_named(esm.config.function_name)): esm for esm in self._esms}

    @staticmethod
    def _actor_of(function: FunctionSpec) -> str:
        return function.environment.get("ASYA_ACTOR") or naming.DEADLINE

    def _require_spec(self) -> MeshSpec:
        self._require(self._clients)
        return self._require(self.spec)

    @property
    def pools(self) -> dict[str, FunctionPool]:
        return dict(self._pools)

    @property
    def tester_credentials(self) -> Credentials:
        """The test principal's keys: the API front lets it invoke every ``AWS_IAM`` method."""
        return self._tester

    @property
    def iam_enforced(self) -> bool:
        return self._proxy is not None

    def denied(self) -> list[str]:
        """Every call refused so far: the IAM proxy's denials, then the API front's."""
        found: list[str] = []
        if self._proxy is not None:
            found.extend(str(record) for record in self._proxy.denied())
        if self._front is not None:
            found.extend(self._front.denied)
        return found

    def clear_denied(self) -> None:
        if self._proxy is not None:
            self._proxy.clear()
        if self._front is not None:
            self._front.denied.clear()

    @property
    def proxy(self) -> Any:
        return self._proxy

    def replace_policies(self, function_name: str, documents: list[dict[str, Any]]) -> None:
        """Hold ``function_name``'s calls to ``documents`` from now on (a test that drops one grant)."""
        from asya_local.iam import PolicySet

        spec = self._require_spec()
        function = spec.function_named(function_name)
        if self._proxy is None:
            raise LocalModeError("IAM is not enforced on this mesh: there are no policies to replace")
        key = self.credentials[function.arn].access_key_id
        self._proxy.set_principal(key, function.name, PolicySet.from_documents(documents))

    def deploy_code(self, function_name: str, code_dir: Path | None = None) -> None:
        """Replace ``function_name``'s code as ``UpdateFunctionCode`` would: later invocations run from ``code_dir``
        (its staged code again when ``None``) under the same layers, restaged dependency layer, environment and
        credentials. A test runs changed code this way without another mesh."""
        function = self._require_spec().function_named(function_name)
        pool = self._pools.get(function.arn)
        if pool is None:
            raise LocalModeError(f"function {function_name}: not an invokable function of this mesh")
        if code_dir is not None:
            function = dataclasses.replace(function, code_dir=code_dir.resolve())
        restager = Restager(self._cache_dir)
        pool.redeploy(self._process_factory(function, restager, restager.runtime_dir(), self._function_endpoint))

    # -- lifecycle (start() and the context manager: asya_local.lifecycle) --------------------------------------

    @property
    def running(self) -> bool:
        return self._url is not None

    def _start(self) -> None:
        started = time.monotonic()
        self._moto = MotoServer(host="127.0.0.1", port=0)
        self._moto.start()
        moto_url = self._moto.endpoint_url
        self._clients = make_clients(moto_url, region=self._region)
        # names and ARNs first: the proxy needs the resolved policies, the policies need the endpoint only for URLs
        assembly = load_assembly(self.cdk_out, region=self._region, account_id=MOTO_ACCOUNT_ID, endpoint_url=moto_url)
        spec = read_mesh(assembly)
        if self._transform_spec is not None:
            spec = self._transform_spec(spec)
        self._assembly, self.spec = assembly, spec
        for function in spec.functions.values():
            self.credentials[function.arn] = Credentials.new(function.logical_id)
        function_endpoint = self._function_endpoint = self._start_iam(moto_url, spec)
        provision_spec(
            spec, sqs=self._clients.sqs, dynamodb=self._clients.dynamodb, s3=self._clients.s3, region=self._region
        )
        restager = Restager(self._cache_dir)
        runtime_dir = restager.runtime_dir()
        web_functions = [f for f in spec.functions.values() if _is_web(f)]
        plain = [f for f in spec.functions.values() if not _is_web(f)]
        for function in plain:
            self._pools[function.arn] = FunctionPool(
                function.name,
                self._process_factory(function, restager, runtime_dir, function_endpoint),
            )
        for function in web_functions:
            self._web[function.arn] = self._web_process(function, restager, runtime_dir, function_endpoint)
        # the web functions (the gateway's imports) start beside the interpreters rather than after them all
        self._start_processes()
        for source in spec.event_sources:
            self._start_esm(source, function_endpoint)
        for schedule in spec.schedules:
            if not schedule.enabled:
                continue
            for target in schedule.functions:
                function = spec.functions[target]
                trigger = ScheduleTrigger(
                    self._pools[target],
                    rule_name=schedule.logical_id,
                    function_name=function.name,
                    interval=self._schedule_interval,
                    timeout=function.timeout,
                    memory=function.memory,
                    region=self._region,
                    account_id=MOTO_ACCOUNT_ID,
                    monotonic=time.monotonic,
                )
                trigger.start()
                self._schedules.append(trigger)
        self._start_api(spec)
        self.startup_seconds = time.monotonic() - started

    def _start_iam(self, moto_url: str, spec: MeshSpec) -> str:
        if not self._iam_wanted:
            return moto_url
        try:
            from asya_local.iam import PolicyProxy, PolicySet
        except ImportError:
            _log.warning("asya_local.iam is not available: the functions' AWS calls are not checked against IAM")
            return moto_url
        principals = {
            self.credentials[f.arn].access_key_id: (f.name, PolicySet.from_documents(list(f.policies)))
            for f in spec.functions.values()
        }
        self._proxy = PolicyProxy(moto_url, principals=principals, region=self._region, account_id=MOTO_ACCOUNT_ID)
        return str(self._proxy.start())

    def _log(self, name: str) -> IO[str] | None:
        if self._log_dir is None:
            return None
        self._log_dir.mkdir(parents=True, exist_ok=True)
        handle = (self._log_dir / f"{name}.log").open("a", encoding="utf-8")
        self._logs.append(handle)
        return handle

    def _layer_paths(self, function: FunctionSpec, restager: Restager) -> list[Path]:
        paths: list[Path] = []
        for layer in function.layer_dirs:
            if is_dependency_layer(layer):
                paths.append(restager.restage(layer))
            else:
                paths.append(layer / "python")
        return paths

    def _environment(self, function: FunctionSpec, runtime_dir: Path, endpoint: str) -> dict[str, str]:
        return lambda_environment(
            variables=function.environment,
            function_name=function.name,
            handler=function.handler,
            memory=function.memory,
            region=self._region,
            code_dir=function.code_dir,
            runtime_dir=runtime_dir,
            credentials=self.credentials[function.arn],
            endpoint_url=endpoint,
            path=os.environ.get("PATH", "/usr/bin:/bin"),
        )

    def _process_factory(
        self, function: FunctionSpec, restager: Restager, runtime_dir: Path, endpoint: str
    ) -> Callable[[], FunctionProcess]:
        if function.external_layers:
            raise LocalModeError(
                f"function {function.logical_id}: external layers {list(function.external_layers)} are not in the "
                "assembly and not emulated"
            )
        sys_path = [function.code_dir, *self._layer_paths(function, restager), runtime_dir]
        env = self._environment(function, runtime_dir, endpoint)
        log = self._log(function.logical_id)

        def new() -> FunctionProcess:
            return FunctionProcess(
                function.name, handler=function.handler, sys_path=sys_path, env=env, timeout=function.timeout, log=log
            )

        return new

    def _start_processes(self) -> None:
        """Every pool's first interpreter and every web function, concurrently; all their errors in one."""
        errors: list[str] = []

        def start(pool: FunctionPool) -> None:
            try:
                process = pool.start()
            except LocalModeError as exc:
                errors.append(str(exc))
                return
            if process.init_error is not None:
                errors.append(
                    f"{pool.name}: {process.init_error.get('errorType')}: {process.init_error.get('errorMessage')}"
                )

        def start_web(web: WebAdapterProcess) -> None:
            try:
                web.start()
            except LocalModeError as exc:
                errors.append(str(exc))

        threads = [threading.Thread(target=start, args=(pool,)) for pool in self._pools.values()]
        threads += [threading.Thread(target=start_web, args=(web,)) for web in self._web.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise LocalModeError("functions failed to initialise: " + "; ".join(sorted(errors)))

    def _web_process(
        self, function: FunctionSpec, restager: Restager, runtime_dir: Path, endpoint: str
    ) -> WebAdapterProcess:
        # built here, in the starting thread: restaging a layer is not safe from two threads at once
        return WebAdapterProcess(
            function.name,
            code_dir=function.code_dir,
            handler=function.handler,
            env=self._environment(function, runtime_dir, endpoint),
            python_path=self._layer_paths(function, restager),
            log=self._log(function.logical_id),
            taken={web.port for web in self._web.values()},
        )

    def _start_esm(self, source: Any, endpoint: str) -> None:
        assert self.spec is not None
        function = self.spec.functions.get(source.function)
        if function is None or source.function not in self._pools:
            raise LocalModeError(f"event source {source.logical_id}: {source.function} is not an invokable function")
        if not source.enabled:
            return
        queue = self.spec.queues[source.queue_arn]
        credentials = self.credentials[function.arn]
        # Lambda polls with the function's execution role: the ESM's calls are checked against it too
        import boto3

        sqs = boto3.Session().client(
            "sqs",
            region_name=self._region,
            endpoint_url=endpoint,
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
            aws_session_token=credentials.session_token,
        )
        esm = EventSourceMapping(
            EsmConfig(
                function_name=function.name,
                queue_url=f"{self.endpoint_url}/{MOTO_ACCOUNT_ID}/{queue.name}",
                batch_size=source.batch_size,
                max_concurrency=min(source.max_concurrency or 1, _MAX_POLLERS),
                lambda_timeout=float(function.timeout),
                memory_mb=function.memory,
                wait_seconds=self._poll_wait,
                region=self._region,
                batching_window_seconds=source.batching_window,
            ),
            self._pools[function.arn].handler(report_batch_item_failures=source.report_batch_item_failures),
            sqs=sqs,
        )
        esm.start()
        self._esms.append(esm)

    def _start_api(self, spec: MeshSpec) -> None:
        if not spec.methods:
            return
        upstreams = {arn: web.url for arn, web in self._web.items()}
        missing = {m.function for m in spec.methods} - set(upstreams)
        if missing:
            raise LocalModeError(
                f"API methods integrate functions that are not web functions: {sorted(map(str, missing))}"
            )
        tester = self._tester
        api_arn = f"arn:aws:execute-api:{self._region}:{MOTO_ACCOUNT_ID}:local"
        principals = {
            tester.access_key_id: Principal(TEST_PRINCIPAL, tester.secret_access_key, _invoke_policy(f"{api_arn}/*"))
        }
        self.authorizers = EdgeAuthorizers(self._invoke_authorizer, api_arn=api_arn, stage="prod")
        self._front = ApiFront(
            spec.methods,
            upstreams=upstreams,
            principals=principals,
            stage="prod",
            api_arn=api_arn,
            authorizers=self.authorizers,
        )
        front = ServerThread(self._front, port=0, name="asya-artifact-api")
        front.start()
        self._servers.append(front)
        signer = ServerThread(
            SigningClient(
                front.url, access_key_id=tester.access_key_id, secret=tester.secret_access_key, region=self._region
            ),
            port=self._port,
            name="asya-artifact-signer",
        )
        signer.start()
        self._servers.append(signer)
        self._api_url = f"{front.url}/prod"
        self._url = f"{signer.url}/prod"

    def _invoke_authorizer(self, arn: str, event: dict[str, Any]) -> Any:
        """An API authorizer's invocation (:mod:`~asya_local.artifact.authorizers`): its function's pool."""
        function = self._require_spec().functions.get(arn)
        if function is None or arn not in self._pools:
            raise LocalModeError(f"authorizer function {arn} is not an invokable function of the assembly")
        context = LambdaContext(
            function_name=function.name,
            invoked_function_arn=arn,
            memory_limit_in_mb=function.memory,
            timeout_seconds=float(function.timeout),
            log_stream_name="local/[$LATEST]authorizer",
            monotonic=time.monotonic,
        )
        return self._pools[arn].invoke(event, context)

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.stop()
        self._servers.clear()
        for web in self._web.values():
            web.stop()
        self._web.clear()
        for esm in self._esms:
            esm.request_stop()
        for trigger in self._schedules:
            trigger._stop.set()
        for esm in self._esms:
            with contextlib.suppress(LocalModeError):
                esm.stop(timeout=30)
        self._esms.clear()
        for trigger in self._schedules:
            trigger.stop()
        self._schedules.clear()
        for pool in self._pools.values():
            pool.stop()
        self._pools.clear()
        if self._proxy is not None:
            self._proxy.stop()
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        self._url = self._api_url = None
        self._clients = None


def _invoke_policy(resource: str) -> Callable[[str], bool]:
    """The test principal's identity policy: ``execute-api:Invoke`` on the API, evaluated as IAM does when the
    evaluator is available (else a wildcard match of that one statement)."""
    try:
        from asya_local.iam import PolicySet
    except ImportError:
        import fnmatch

        return lambda arn: fnmatch.fnmatchcase(arn, resource)
    policy = PolicySet.from_documents(
        [
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resource}],
            }
        ]
    )
    return lambda arn: policy.evaluate("execute-api:Invoke", arn, {}).allowed


def _is_web(function: FunctionSpec) -> bool:
    return "AWS_LWA_INVOKE_MODE" in function.environment or "AWS_LAMBDA_EXEC_WRAPPER" in function.environment


@contextlib.contextmanager
def temporary_logs() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=f"asya-artifact-{secrets.token_hex(3)}-") as directory:
        yield Path(directory)
