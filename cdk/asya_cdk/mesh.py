"""``AsyaMesh``: every resource of one ``asya.yaml`` mesh as a single construct, to mount in any CDK stack.

    mesh = AsyaMesh(stack, "Default", manifest="asya.yaml")
    mesh.actors["analyze"].queue, mesh.dynamo_table_interface, mesh.api_gateway, ...

What it creates: the storage (:class:`~asya_cdk.storage.Storage`, or the caller's existing table / bucket), the
layers, one :class:`~asya_cdk.actor.Actor` per deployed actor (user actors, then x-sink and x-sump), the gateway, the
deadline backstop with its timer queue (:class:`~asya_cdk.backstop.Backstop`), the alarms (optionally notifying the
manifest's SNS topic) and the dashboard (:class:`~asya_cdk.observability.MeshObservability`). Grants follow the
least-privilege matrix of :mod:`asya_cdk.permissions`. Every function gets ``ASYA_ACCOUNT_ID`` = the stack's account
(GW-CREATE-7) besides the environment of :mod:`asya.environment`.

Props (AWS Solutions Constructs style, :mod:`asya_cdk.props`): ``queue_props``, ``dead_letter_queue_props``,
``sqs_event_source_props``, ``lambda_function_props`` (``FunctionOptions``), ``table_props``, ``bucket_props``,
``api_gateway_props``, ``log_group_props`` apply over the mesh's defaults to every resource of their kind;
``existing_table_obj`` / ``existing_bucket_obj`` replace the created table / bucket (not together with the props of the
same resource). A field the manifest or the naming rules own is refused. Every problem (props, manifest, sources,
auth, env maps, region) is collected and raised as one :class:`~asya_cdk.errors.DeploymentError` before the construct
is created.

Mesh size: CloudFormation allows 500 resources per stack, and an actor takes 11. Up to :data:`INLINE_ACTORS` deployed
actors live in the enclosing stack; a larger mesh (or any mesh given ``actors_per_stack``) puts its actors in nested
stacks ``Actors0``, ``Actors1``, ... of ``actors_per_stack`` (default :data:`DEFAULT_ACTORS_PER_STACK`) each. Moving a
mesh across that line changes the actors' logical ids, which fixed-name queues cannot survive in place: a mesh expected
to grow past it should set ``actors_per_stack`` from its first deployment.

Ids are a contract: mount the construct as ``"Default"`` to keep the logical ids of the ``AsyaStack`` of earlier
versions. The construct emits no ``CfnOutput`` and reads no context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import Aws, CfnParameter, NestedStack, Stack, Tags
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from asya import naming
from asya.environment import ReservedVariableError, actor_environment, check_env_map, gateway_environment
from asya.envnames import ENV
from asya.exceptions import AsyaError
from asya.manifest import Manifest, load_manifest
from asya_cdk.actor import Actor, ActorOverrides
from asya_cdk.assets import (
    ASSET_EXCLUDES,
    GATEWAY_MANIFEST_FILE,
    SourceLayout,
    render_manifest_json,
    stage_gateway_asset,
)
from asya_cdk.backstop import Backstop
from asya_cdk.bytecode import interpreter_matches, stage_compiled
from asya_cdk.crew import SIDECAR_HANDLER, crew_handler
from asya_cdk.dependencies import LAYER_REQUIREMENTS, DependencyBuilder, locked_layer_code, pinned_requirements
from asya_cdk.errors import DeploymentError
from asya_cdk.gateway import Gateway, check_auth
from asya_cdk.locks import Lock, check_lock
from asya_cdk.lwa import DEFAULT_LWA_VERSION, lwa_layer_arn
from asya_cdk.nag import acknowledge
from asya_cdk.observability import MeshObservability
from asya_cdk.permissions import ACTOR, BACKSTOP, GATEWAY, SINK, SUMP, Access, grant_access
from asya_cdk.props import check_props, given_fields
from asya_cdk.settings import PYTHON_RUNTIMES
from asya_cdk.storage import Storage

__all__ = ["DEFAULT_ACTORS_PER_STACK", "DEFAULT_BACKSTOP_HANDLER", "INLINE_ACTORS", "AsyaMesh", "default_sources"]

DEFAULT_BACKSTOP_HANDLER: Final = "asya_gateway.backstop.lambda_handler"
#: Deployed actors that stay in the enclosing stack (11 resources each, with ~60 shared ones, under 500).
INLINE_ACTORS: Final = 36
#: Actors per nested stack when the mesh is split.
DEFAULT_ACTORS_PER_STACK: Final = 40
_MAX_ACTORS_PER_STACK: Final = 42
_BASIC_EXECUTION_POLICY: Final = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
_CREW_ACCESS: Final[Mapping[str, Access]] = {naming.SINK: SINK, naming.SUMP: SUMP}


def default_sources() -> SourceLayout:
    """The source tree this package was installed from (an editable install of asya-serverless)."""
    return SourceLayout.from_repo(Path(__file__).resolve().parents[2])


class AsyaMesh(Construct):
    """Queues, DLQs, actor Lambdas, table, bucket, gateway API, backstop, alarms and dashboard of one mesh."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        manifest: Manifest | str | Path,
        runtime: lambda_.Runtime | None = None,
        web_adapter_layer: lambda_.ILayerVersion | None = None,
        lwa_layer_version: int = DEFAULT_LWA_VERSION,
        sources: SourceLayout | None = None,
        dependencies: DependencyBuilder | None = None,
        queue_props: sqs.QueueProps | None = None,
        dead_letter_queue_props: sqs.QueueProps | None = None,
        sqs_event_source_props: event_sources.SqsEventSourceProps | None = None,
        lambda_function_props: lambda_.FunctionOptions | None = None,
        existing_table_obj: dynamodb.ITable | None = None,
        table_props: dynamodb.TableProps | None = None,
        existing_bucket_obj: s3.IBucket | None = None,
        bucket_props: s3.BucketProps | None = None,
        api_gateway_props: apigw.RestApiProps | None = None,
        log_group_props: logs.LogGroupProps | None = None,
        actors_per_stack: int | None = None,
        backstop_handler: str = DEFAULT_BACKSTOP_HANDLER,
    ) -> None:
        layout = sources or default_sources()
        loaded, problems = _load(manifest)
        hooks: dict[str, object | None] = {
            "queue_props": queue_props,
            "dead_letter_queue_props": dead_letter_queue_props,
            "sqs_event_source_props": sqs_event_source_props,
            "lambda_function_props": lambda_function_props,
            "table_props": table_props,
            "bucket_props": bucket_props,
            "api_gateway_props": api_gateway_props,
            "log_group_props": log_group_props,
        }
        problems += check_props(hooks)
        if existing_table_obj is not None and table_props is not None:
            problems.append("existing_table_obj, table_props: give one or the other, not both")
        if existing_bucket_obj is not None and bucket_props is not None:
            problems.append("existing_bucket_obj, bucket_props: give one or the other, not both")
        if actors_per_stack is not None and not 1 <= actors_per_stack <= _MAX_ACTORS_PER_STACK:
            problems.append(
                f"actors_per_stack: {actors_per_stack!r} is outside 1..{_MAX_ACTORS_PER_STACK} (500 resources per "
                "nested stack)"
            )
        runtime = _runtime(loaded, runtime, problems)
        handlers: dict[str, str] = {}
        if loaded is not None:
            handlers = _check_manifest(loaded, layout, problems)
        if web_adapter_layer is None and loaded is not None:
            try:
                adapter_arn: str | None = lwa_layer_arn(Stack.of(scope).region, lwa_layer_version)
            except DeploymentError as exc:
                problems.append(str(exc))
        else:
            adapter_arn = None
        locks = _check_locks(layout, runtime, problems) if loaded is not None else {}
        if problems or loaded is None:
            raise DeploymentError("cannot deploy this mesh:\n- " + "\n- ".join(problems))
        super().__init__(scope, id)
        self._manifest = loaded
        namespace = loaded.namespace
        Tags.of(self).add("asya:namespace", namespace)
        key = self._key(loaded)
        self._key_obj = key
        retention = logs.RetentionDays[_RETENTION[loaded.observability.log_retention_days]]
        function_extra = given_fields(lambda_function_props)
        log_extra = given_fields(log_group_props)

        self._storage = Storage(
            self,
            "Storage",
            namespace=namespace,
            key=key,
            table_props=given_fields(table_props),
            bucket_props=given_fields(bucket_props),
            existing_table=existing_table_obj,
            existing_bucket=existing_bucket_obj,
        )
        table, bucket = self._storage.table, self._storage.bucket

        python_version = runtime.name.removeprefix("python")
        compiled = interpreter_matches(python_version)
        builder = dependencies or DependencyBuilder(
            cache_dir=layout.staging_dir, python_version=python_version, compile_bytecode=compiled
        )
        sidecar_dir = (
            stage_compiled(layout.sidecar_layer_dir, layout.staging_dir, "sidecar")
            if compiled
            else layout.sidecar_layer_dir
        )
        sidecar_layer = self._layer(
            "SidecarLayer",
            lambda_.Code.from_asset(str(sidecar_dir), exclude=[] if compiled else list(ASSET_EXCLUDES)),
            runtime,
            "asya sidecar library (package asya)" + (f", compiled for Python {python_version}" if compiled else ""),
        )
        actor_deps = self._layer(
            "ActorDependencies", locked_layer_code(builder, locks["actor"]), runtime, "asya actor dependencies"
        )
        gateway_deps = self._layer(
            "GatewayDependencies", locked_layer_code(builder, locks["gateway"]), runtime, "asya gateway dependencies"
        )

        deployed = loaded.deployed_actors()
        code_cache: dict[tuple[str, Path], lambda_.Code] = {}
        overrides = ActorOverrides(
            queue=given_fields(queue_props),
            dead_letter_queue=given_fields(dead_letter_queue_props),
            event_source=given_fields(sqs_event_source_props),
            function=function_extra,
            log_group=log_extra,
        )
        self._actor_stacks: list[NestedStack] = []
        self._actors: dict[str, Actor] = {}
        shared = _Shared(scope=self, table=table, bucket=bucket, layers=(sidecar_layer, actor_deps))
        for actor, group in zip(deployed, self._actor_groups(len(deployed), actors_per_stack, shared), strict=True):
            directory = layout.crew_dir if actor.crew else actor.code_dir
            assert directory is not None  # checked by _check_manifest
            code = _code(group.scope, directory, code_cache)
            built = Actor(
                group.scope,
                actor.name,
                namespace=namespace,
                actor=actor,
                code=code,
                handler=handlers[actor.name],
                runtime=runtime,
                layers=group.layers,
                environment={
                    **actor_environment(loaded, actor, table=group.table.table_name, bucket=group.bucket.bucket_name),
                    ENV.account_id: Aws.ACCOUNT_ID,
                },
                log_retention=retention,
                key=key,
                overrides=overrides,
            )
            access = _CREW_ACCESS.get(actor.name, ACTOR)
            grant_access(built.function, access, namespace=namespace, table=group.table, bucket=group.bucket, key=key)
            self._actors[actor.name] = built

        gateway_dir = stage_gateway_asset(
            gateway_dir=layout.gateway_dir,
            manifest_json=render_manifest_json(loaded),
            staging_dir=layout.staging_dir,
        )
        gateway_code = lambda_.Code.from_asset(str(gateway_dir))
        manifest_path = f"/var/task/{GATEWAY_MANIFEST_FILE}"
        adapter = web_adapter_layer or lambda_.LayerVersion.from_layer_version_arn(
            self, "WebAdapterLayer", str(adapter_arn)
        )
        self._gateway = Gateway(
            self,
            "Gateway",
            api_name=f"asya-{namespace}",
            auth=loaded.gateway.auth,
            cors_origins=loaded.gateway.cors_origins,
            code=gateway_code,
            runtime=runtime,
            layers=[sidecar_layer, gateway_deps],
            adapter_layer=adapter,
            environment={
                **gateway_environment(table=table.table_name, bucket=bucket.bucket_name, manifest_path=manifest_path),
                ENV.account_id: Aws.ACCOUNT_ID,
            },
            log_retention=retention,
            api_overrides=given_fields(api_gateway_props),
        )
        self._backstop = Backstop(
            self,
            "Backstop",
            namespace=namespace,
            handler=backstop_handler,
            code=gateway_code,
            runtime=runtime,
            layers=[sidecar_layer, gateway_deps],
            environment={
                **gateway_environment(
                    table=table.table_name, bucket=bucket.bucket_name, manifest_path=manifest_path, service="backstop"
                ),
                ENV.account_id: Aws.ACCOUNT_ID,
            },
            log_retention=retention,
            key=key,
            function_overrides={k: v for k, v in function_extra.items() if k != "layers"},
        )
        grant_access(self._gateway.function, GATEWAY, namespace=namespace, table=table, bucket=bucket, key=key)
        grant_access(self._backstop.function, BACKSTOP, namespace=namespace, table=table, bucket=bucket, key=key)
        # mq-diagnostic (GW-OPS-3) reads the queues' oldest-message age from CloudWatch
        self._gateway.function.add_to_role_policy(
            iam.PolicyStatement(actions=["cloudwatch:GetMetricStatistics"], resources=["*"])
        )
        acknowledge(
            self._gateway,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricStatistics has no resource-level permissions; it only reads metrics.",
        )
        self._observability = MeshObservability(
            self,
            "Alarms",
            namespace=namespace,
            actors=list(self._actors.values()),
            backstop=self._backstop,
            gateway=self._gateway,
            alarm_topic_arn=loaded.observability.alarm_topic_arn,
            dashboard=loaded.observability.dashboard,
        )
        self._acknowledge()

    def _key(self, manifest: Manifest) -> kms.IKey | None:
        arn = manifest.storage.kms_key_arn
        return None if arn is None else kms.Key.from_key_arn(self, "Key", arn)

    def _actor_groups(self, count: int, per_stack: int | None, shared: _Shared) -> list[_Shared]:
        """Where each actor goes: this construct, or nested stacks of ``per_stack`` actors. A nested stack takes the
        table, bucket and layers as its own parameters, so its policies and cdk-nag findings name them locally."""
        if per_stack is None and count <= INLINE_ACTORS:
            return [shared] * count
        size = per_stack or DEFAULT_ACTORS_PER_STACK
        groups: list[_Shared] = []
        for index in range(count):
            if index % size == 0:
                groups.append(self._nested_group(index // size, shared))
            else:
                groups.append(groups[-1])
        return groups

    def _nested_group(self, number: int, shared: _Shared) -> _Shared:
        values = {
            "TableArn": shared.table.table_arn,
            "BucketArn": shared.bucket.bucket_arn,
            "BucketName": shared.bucket.bucket_name,
            **{f"Layer{i}": layer.layer_version_arn for i, layer in enumerate(shared.layers)},
        }
        nested = NestedStack(
            self, f"Actors{number}", description=f"asya mesh actors, group {number}", parameters=values
        )
        self._actor_stacks.append(nested)
        param = {name: CfnParameter(nested, name, type="String").value_as_string for name in values}
        return _Shared(
            scope=nested,
            table=dynamodb.Table.from_table_attributes(nested, "SharedTable", table_arn=param["TableArn"]),
            bucket=s3.Bucket.from_bucket_attributes(
                nested, "SharedBucket", bucket_arn=param["BucketArn"], bucket_name=param["BucketName"]
            ),
            layers=tuple(
                lambda_.LayerVersion.from_layer_version_arn(nested, f"SharedLayer{i}", param[f"Layer{i}"])
                for i in range(len(shared.layers))
            ),
        )

    def _layer(self, id: str, code: lambda_.Code, runtime: lambda_.Runtime, description: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            id,
            code=code,
            compatible_runtimes=[runtime],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description=description[:256],
        )

    def _acknowledge(self) -> None:
        acknowledge(
            self,
            f"AwsSolutions-IAM4[{_BASIC_EXECUTION_POLICY}]",
            "AWSLambdaBasicExecutionRole only lets a function write its own CloudWatch logs.",
        )

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def actors(self) -> Mapping[str, Actor]:
        """Every deployed actor by name, each with ``.queue``, ``.dlq``, ``.function``."""
        return dict(self._actors)

    @property
    def actor_stacks(self) -> Sequence[NestedStack]:
        """The nested stacks holding the actors; empty when they live in the enclosing stack."""
        return tuple(self._actor_stacks)

    @property
    def dynamo_table_interface(self) -> dynamodb.ITable:
        return self._storage.table

    @property
    def dynamo_table(self) -> dynamodb.Table | None:
        """The table the mesh created; ``None`` with ``existing_table_obj``."""
        return self._storage.created_table

    @property
    def s3_bucket_interface(self) -> s3.IBucket:
        return self._storage.bucket

    @property
    def s3_bucket(self) -> s3.Bucket | None:
        """The bucket the mesh created; ``None`` with ``existing_bucket_obj``."""
        return self._storage.created_bucket

    @property
    def encryption_key(self) -> kms.IKey | None:
        """The manifest's customer-managed key; ``None``: AWS-owned keys."""
        return self._key_obj

    @property
    def gateway(self) -> Gateway:
        return self._gateway

    @property
    def gateway_function(self) -> lambda_.Function:
        return self._gateway.function

    @property
    def api_gateway(self) -> apigw.RestApi:
        return self._gateway.api

    @property
    def api_gateway_log_group(self) -> logs.LogGroup:
        return self._gateway.access_log_group

    @property
    def api_gateway_cloud_watch_role(self) -> iam.IRole | None:
        return self._gateway.api.node.try_find_child("CloudWatchRole")  # type: ignore[return-value]

    @property
    def backstop(self) -> Backstop:
        return self._backstop

    @property
    def observability(self) -> MeshObservability:
        """Alarms, the optional SNS topic and the dashboard."""
        return self._observability

    @property
    def alarms(self) -> MeshObservability:
        return self._observability


@dataclass(frozen=True, slots=True)
class _Shared:
    """What the actors of one stack use: the construct they go into, the table, the bucket, the layers."""

    scope: Construct
    table: dynamodb.ITable
    bucket: s3.IBucket
    layers: tuple[lambda_.ILayerVersion, ...]


def _load(manifest: Manifest | str | Path) -> tuple[Manifest | None, list[str]]:
    if isinstance(manifest, Manifest):
        return manifest, []
    try:
        return load_manifest(Path(manifest)), []
    except AsyaError as exc:
        return None, [f"manifest: {exc}"]


def _check_manifest(manifest: Manifest, sources: SourceLayout, problems: list[str]) -> dict[str, str]:
    """Append what cannot be deployed to ``problems``; return each actor's Lambda handler."""
    try:
        check_auth(manifest.gateway.auth)
        sources.validate()
    except DeploymentError as exc:
        problems.append(str(exc))
    if (problem := naming.undeployed_crew(manifest.crew_targets())) is not None:
        problems.append(problem)
    if (missing := manifest.missing_code_dir()) is not None:
        problems.append(missing)
    handlers: dict[str, str] = {}
    for actor in manifest.deployed_actors():
        try:
            handlers[actor.name] = crew_handler(actor.name) if actor.crew else SIDECAR_HANDLER
            check_env_map(actor)
        except (ReservedVariableError, DeploymentError) as exc:
            problems.append(str(exc))
    return handlers


def _code(scope: Construct, directory: Path, cache: dict[tuple[str, Path], lambda_.Code]) -> lambda_.Code:
    """One asset per directory and stack (CDK binds a ``Code`` to the first stack that uses it)."""
    key = (Stack.of(scope).node.path, directory)
    if key not in cache:
        cache[key] = lambda_.Code.from_asset(str(directory), exclude=list(ASSET_EXCLUDES))
    return cache[key]


def _runtime(manifest: Manifest | None, given: lambda_.Runtime | None, problems: list[str]) -> lambda_.Runtime:
    """The manifest's ``deployment.python_version``, else ``given``, else Python 3.14; a clash is a problem."""
    chosen = None if manifest is None else manifest.deployment.python_version
    if given is not None and given.name not in {r.name for r in PYTHON_RUNTIMES.values()}:
        problems.append(f"runtime: {given.name!r} is not one of the Python runtimes {sorted(PYTHON_RUNTIMES)}")
        return lambda_.Runtime.PYTHON_3_14
    if chosen is not None:
        if given is not None and given.name != PYTHON_RUNTIMES[chosen].name:
            problems.append(
                f"runtime: {given.name!r} clashes with the manifest's deployment.python_version {chosen!r}; "
                "give one of them"
            )
        return PYTHON_RUNTIMES[chosen]
    return given or lambda_.Runtime.PYTHON_3_14


def _check_locks(layout: SourceLayout, runtime: lambda_.Runtime, problems: list[str]) -> dict[str, Lock]:
    """The committed lock of each dependency layer, checked against ``pyproject.toml`` (no network)."""
    locks: dict[str, Lock] = {}
    for layer, names in LAYER_REQUIREMENTS.items():
        try:
            requires = pinned_requirements(names, pyproject=layout.pyproject)
            locks[layer] = check_lock(layout.lock_dir, layer, runtime.name.removeprefix("python"), requires)
        except DeploymentError as exc:
            problems.append(str(exc))
    return locks


_RETENTION: Final[Mapping[int, str]] = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
}
