"""``ArtifactMesh``: the mesh a cloud assembly (``cdk.out``) describes, run locally against moto.

Start order: moto's server (a child process); the IAM proxy in front of it when :mod:`asya_local.iam` is available
(each function's calls then go through it under the function's own credentials and role policies); the assembly's
resources (:mod:`~asya_local.artifact.provision`); one interpreter per function and, concurrently, each web function
started as the Lambda Web Adapter starts it (:mod:`~asya_local.artifact.launcher`: layers restaged for this machine,
Lambda's environment, more interpreters when concurrent invocations need them); the event source mappings and one
trigger per schedule rule, every ``schedule_interval`` seconds locally (:mod:`~asya_local.artifact.triggers`); the API
front with the template's methods and a signing client of the test principal (:mod:`~asya_local.artifact.api`).
``url`` is that client's URL with the stage (``.../prod``): plain HTTP requests to it reach the API signed, so a
suite written against a gateway URL runs unchanged. ``api_url`` is the API front itself (unsigned requests to
``AWS_IAM`` methods get 403 there; a ``CUSTOM`` method runs its Lambda authorizer, counted in :attr:`authorizers`).
:meth:`ArtifactMesh.relayed` lists the requests the front passed to a function.

:meth:`ArtifactMesh.update` applies another assembly to the running mesh as a stack update would, moto's state kept
(:mod:`~asya_local.artifact.update`): the local rehearsal of a redeploy.

``denied()`` lists every call refused: by the IAM proxy (a function's AWS call its role does not allow) and by the
API front (a request without a valid signature or permission).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from asya import naming
from asya_local.artifact.api import authorizer_invoker, start_api
from asya_local.artifact.apifront import ApiFront
from asya_local.artifact.authorizers import EdgeAuthorizers
from asya_local.artifact.functions import FunctionPool, ScheduleTrigger
from asya_local.artifact.launcher import FunctionLauncher, is_web, start_all
from asya_local.artifact.model import FunctionSpec, MeshSpec, read_mesh
from asya_local.artifact.process import Credentials
from asya_local.artifact.provision import provision_spec
from asya_local.artifact.template import Assembly, load_assembly
from asya_local.artifact.triggers import start_event_source, start_schedules
from asya_local.artifact.update import MeshUpdate, apply_resources, plan_update, remove_resources
from asya_local.artifact.webadapter import WebAdapterProcess
from asya_local.esm import EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.lifecycle import MeshLifecycle
from asya_local.moto_server import DEFAULT_REGION, MOTO_ACCOUNT_ID, AwsClients, MotoServer, make_clients
from asya_local.provision import MeshResources
from asya_local.serving import UvicornThread

__all__ = ["DEFAULT_CACHE_DIR", "ArtifactMesh"]

_log = logging.getLogger(__name__)

#: Where restaged layers are kept between runs (relative to the working directory).
DEFAULT_CACHE_DIR: Final = Path(".asya/artifact-cache")


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
        self._servers: list[UvicornThread] = []
        self._launcher: FunctionLauncher | None = None
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

    def relayed(self, function_name: str | None = None) -> list[str]:
        """The requests the API front passed on (``METHOD /path``), to ``function_name`` only when given: a refused
        request is never among them."""
        if self._front is None:
            return []
        arn = self._require_spec().function_named(function_name).arn if function_name else None
        return [request for target, request in self._front.relayed if arn is None or target == arn]

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
        pool.redeploy(self._require(self._launcher).process_factory(function, self._function_endpoint))

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
        launcher = self._launcher = FunctionLauncher(
            cache_dir=self._cache_dir, region=self._region, credentials=self.credentials, log_dir=self._log_dir
        )
        for function in spec.functions.values():
            if not is_web(function):
                self._pools[function.arn] = FunctionPool(
                    function.name, launcher.process_factory(function, function_endpoint)
                )
        for function in spec.functions.values():
            if is_web(function):
                taken = {web.port for web in self._web.values()}
                self._web[function.arn] = launcher.web_process(function, function_endpoint, taken=taken)
        # the web functions (the gateway's imports) start beside the interpreters rather than after them all
        start_all(self._pools.values(), self._web.values())
        self._start_triggers(spec)
        if spec.methods:
            api = start_api(
                spec,
                upstreams={arn: web.url for arn, web in self._web.items()},
                tester=self._tester,
                region=self._region,
                port=self._port,
                invoke_authorizer=authorizer_invoker(self._require_spec, self._pools),
            )
            self._front, self.authorizers = api.front, api.authorizers
            self._servers.extend(api.servers)
            self._api_url, self._url = api.api_url, api.url
        self.startup_seconds = time.monotonic() - started

    def _start_triggers(self, spec: MeshSpec) -> None:
        for source in spec.event_sources:
            esm = start_event_source(
                spec,
                source,
                pools=self._pools,
                credentials=self.credentials,
                endpoint=self._function_endpoint,
                queue_endpoint=self.endpoint_url,
                region=self._region,
                poll_wait=self._poll_wait,
            )
            if esm is not None:
                self._esms.append(esm)
        self._schedules.extend(
            start_schedules(spec, pools=self._pools, interval=self._schedule_interval, region=self._region)
        )

    def _stop_triggers(self, *, exact: bool = False) -> None:
        """Every mapping and schedule stopped, their invocations in flight finished (pollers first, all at once).
        ``exact`` (an update): wait for an invocation up to its function's timeout, and raise rather than go on
        beside one still running."""
        for esm in self._esms:
            esm.request_stop()
        for trigger in self._schedules:
            trigger._stop.set()
        for esm in self._esms:
            if exact:
                esm.stop(timeout=esm.config.lambda_timeout + 10)
                continue
            with contextlib.suppress(LocalModeError):
                esm.stop(timeout=30)
        self._esms.clear()
        for trigger in self._schedules:
            trigger.stop()
        self._schedules.clear()

    def stop_pollers(self, actors: Iterable[str] | None = None) -> None:
        """Stop the event source mappings of ``actors`` (as :attr:`esms` names them; all when ``None``) and wait for
        their invocations in flight: their queues fill from now on. A test holds work in a queue this way; every
        mapping starts again at :meth:`update`."""
        chosen = self.esms if actors is None else {actor: self.esms[actor] for actor in actors}
        for esm in chosen.values():
            esm.request_stop()
        for esm in chosen.values():
            esm.stop(timeout=esm.config.lambda_timeout + 10)

    def update(self, cdk_out: str | Path) -> MeshUpdate:
        """Apply the assembly at ``cdk_out`` as a CloudFormation stack update would, keeping moto's state (tasks,
        objects, messages): checked first (:func:`~asya_local.artifact.update.plan_update` raises
        :class:`~asya_local.artifact.update.ReplacementError` for a replacement of the table or the bucket, and
        nothing has changed); then every poller and schedule stops and its invocations in flight finish, so each
        message is handled wholly before or wholly after the update; queues, tables, buckets and secrets are created
        or updated; functions added, replaced (code, layers, environment: new invocations run the new ones, an
        invocation in flight ends on the old) and removed; role policies swapped at the IAM proxy; the API rerouted
        to replaced web functions; every mapping and schedule of the new assembly started; removed queues (with what
        they hold) and secrets deleted. A failure after the check leaves the mesh as far as it got (there is no
        rollback): stop it."""
        old, clients, launcher = self._require_spec(), self.clients, self._require(self._launcher)
        path = Path(cdk_out).resolve()
        assembly = load_assembly(path, region=self._region, account_id=MOTO_ACCOUNT_ID, endpoint_url=self.endpoint_url)
        new = read_mesh(assembly)
        if self._transform_spec is not None:
            new = self._transform_spec(new)
        change = plan_update(old, new)
        self._stop_triggers(exact=True)
        where = {"region": self._region, "endpoint": self.endpoint_url}
        apply_resources(change, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3, **where)
        for function in change.functions_added:
            self.credentials[function.arn] = Credentials.new(function.logical_id)
        if self._proxy is not None:
            from asya_local.iam import PolicySet

            for function in (*change.functions_added, *change.policies_changed):
                key = self.credentials[function.arn].access_key_id
                self._proxy.set_principal(key, function.name, PolicySet.from_documents(list(function.policies)))
        self._assembly, self.spec, self.cdk_out = assembly, new, path
        pools: list[FunctionPool] = []
        webs: dict[str, WebAdapterProcess] = {}
        for function in (*change.functions_added, *change.functions_changed):
            if is_web(function):
                taken = {web.port for web in (*self._web.values(), *webs.values())}
                webs[function.arn] = launcher.web_process(function, self._function_endpoint, taken=taken)
                continue
            factory = launcher.process_factory(function, self._function_endpoint)
            if function.arn in self._pools:
                self._pools[function.arn].redeploy(factory)
            else:
                self._pools[function.arn] = FunctionPool(function.name, factory)
            pools.append(self._pools[function.arn])
        start_all(pools, webs.values())
        replaced = [self._web[arn] for arn in webs if arn in self._web]
        self._web.update(webs)
        if self._front is not None:
            self._front.reroute(new.methods, upstreams={arn: web.url for arn, web in self._web.items()})
        for web in replaced:
            web.stop()
        for function in change.functions_removed:
            if function.arn in self._web:
                self._web.pop(function.arn).stop()
            if function.arn in self._pools:
                self._pools.pop(function.arn).stop()
        self._start_triggers(new)
        remove_resources(change, sqs=clients.sqs, **where)
        return change

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

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.stop()
        self._servers.clear()
        for web in self._web.values():
            web.stop()
        self._web.clear()
        self._stop_triggers()
        for pool in self._pools.values():
            pool.stop()
        self._pools.clear()
        if self._proxy is not None:
            self._proxy.stop()
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        if self._launcher is not None:
            self._launcher.close()
        self._url = self._api_url = None
        self._clients = None
