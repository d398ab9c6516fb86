"""The stack of one mesh: storage, one :class:`Actor` per deployed actor (user actors, then x-sink and x-sump), the
gateway, the deadline backstop and the mesh-wide alarms (:class:`MeshAlarms`; each actor has its DLQ alarm), with
least-privilege grants between them.

Every input is validated before the first construct is created: the gateway's auth mode (GW-AUTH-6), the source
directories, each actor's code directory, handler and ``env`` map. Then the dependency layers are built (or taken
from the cache) and the gateway asset staged, then the resources are created.

Function environments come from the contract module ``asya.environment`` (the local mode uses the same functions):
an actor's ``env`` map may not redefine a deployment variable nor one Lambda reserves.

Grants: every actor and the gateway may send to every queue of the mesh (routes, retries, x-sink, x-sump); an actor
consumes its own queue; actors and the gateway read and write the table (items and the three indexes, by name) and
the bucket's objects; the backstop reads and writes the table only.

Outputs: ``GatewayUrl``, ``TableName``, ``BucketName`` and one ``QueueUrl`` per actor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from aws_cdk import AssetHashType, CfnElement, CfnOutput, Environment, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asya.environment import ReservedVariableError, actor_environment, check_env_map, gateway_environment
from asya.manifest import DeployedActor, Manifest
from asya.naming import SUMP, undeployed_crew
from asya_cdk.actor import Actor
from asya_cdk.alarms import MeshAlarms
from asya_cdk.assets import (
    ASSET_EXCLUDES,
    GATEWAY_MANIFEST_FILE,
    SourceLayout,
    render_manifest_json,
    stage_gateway_asset,
)
from asya_cdk.backstop import Backstop
from asya_cdk.crew import SIDECAR_HANDLER, crew_handler
from asya_cdk.dependencies import (
    ACTOR_REQUIREMENTS,
    GATEWAY_REQUIREMENTS,
    DependencyBuilder,
    pinned_requirements,
)
from asya_cdk.errors import DeploymentError
from asya_cdk.gateway import Gateway, lwa_layer_arn, validate_auth
from asya_cdk.nag import acknowledge
from asya_cdk.settings import DeploySettings
from asya_cdk.storage import Storage

__all__ = ["DEFAULT_BACKSTOP_HANDLER", "AsyaStack", "default_stack_name", "queue_output_key"]

DEFAULT_BACKSTOP_HANDLER: Final = "asya_gateway.backstop.lambda_handler"
_BASIC_EXECUTION_POLICY: Final = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
_APIGW_LOGS_POLICY: Final = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
)


def default_stack_name(manifest: Manifest) -> str:
    return f"asya-{manifest.namespace}"


class AsyaStack(Stack):
    """Every resource of one mesh."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        manifest: Manifest,
        sources: SourceLayout,
        settings: DeploySettings,
        dependencies: DependencyBuilder | None = None,
        actor_requirements: Sequence[str] = ACTOR_REQUIREMENTS,
        gateway_requirements: Sequence[str] = GATEWAY_REQUIREMENTS,
        backstop_handler: str = DEFAULT_BACKSTOP_HANDLER,
        **stack_props: Any,
    ) -> None:
        deployed = manifest.deployed_actors()
        handlers = _validate(manifest, sources, deployed)
        builder = dependencies or DependencyBuilder(
            cache_dir=sources.staging_dir, python_version=settings.python_version
        )
        actor_pins = pinned_requirements(actor_requirements, pyproject=sources.pyproject)
        gateway_pins = pinned_requirements(gateway_requirements, pyproject=sources.pyproject)
        actor_deps_dir = builder.build(actor_pins)
        gateway_deps_dir = builder.build(gateway_pins)
        gateway_dir = stage_gateway_asset(
            gateway_dir=sources.gateway_dir,
            manifest_json=render_manifest_json(manifest),
            staging_dir=sources.staging_dir,
        )
        stack_props.setdefault("env", Environment(region=settings.region))
        stack_props.setdefault("description", f"asya mesh {manifest.namespace} (asya-serverless)")
        super().__init__(scope, id, **stack_props)
        self._manifest = manifest
        Tags.of(self).add("asya:namespace", manifest.namespace)
        runtime = settings.runtime

        self._storage = Storage(self, "Storage", namespace=manifest.namespace)
        table_name = self._storage.table.table_name
        bucket_name = self._storage.bucket.bucket_name

        sidecar_layer = self._layer(
            "SidecarLayer",
            lambda_.Code.from_asset(str(sources.sidecar_layer_dir), exclude=list(ASSET_EXCLUDES)),
            runtime,
            "asya sidecar library (package asya)",
        )
        actor_deps = self._layer(
            "ActorDependencies",
            _cached_code(builder, actor_deps_dir, actor_pins),
            runtime,
            "asya actor dependencies: " + ", ".join(actor_pins),
        )
        gateway_deps = self._layer(
            "GatewayDependencies",
            _cached_code(builder, gateway_deps_dir, gateway_pins),
            runtime,
            "asya gateway dependencies: " + ", ".join(gateway_pins),
        )

        crew_code = lambda_.Code.from_asset(str(sources.crew_dir), exclude=list(ASSET_EXCLUDES))
        code_by_dir: dict[Path, lambda_.Code] = {}
        self._actors: dict[str, Actor] = {}
        for actor in deployed:
            code: lambda_.Code
            if actor.crew:
                code = crew_code
            else:
                assert actor.code_dir is not None
                if actor.code_dir not in code_by_dir:
                    code_by_dir[actor.code_dir] = lambda_.Code.from_asset(
                        str(actor.code_dir), exclude=list(ASSET_EXCLUDES)
                    )
                code = code_by_dir[actor.code_dir]
            self._actors[actor.name] = Actor(
                self,
                actor.name,
                namespace=manifest.namespace,
                actor=actor,
                code=code,
                handler=handlers[actor.name],
                runtime=runtime,
                layers=[sidecar_layer, actor_deps],
                environment=actor_environment(manifest, actor, table=table_name, bucket=bucket_name),
            )

        gateway_code = lambda_.Code.from_asset(str(gateway_dir))
        manifest_path = f"/var/task/{GATEWAY_MANIFEST_FILE}"
        gateway_env = gateway_environment(table=table_name, bucket=bucket_name, manifest_path=manifest_path)
        self._gateway = Gateway(
            self,
            "Gateway",
            api_name=default_stack_name(manifest),
            auth=manifest.gateway.auth,
            cors_origins=manifest.gateway.cors_origins,
            code=gateway_code,
            runtime=runtime,
            layers=[sidecar_layer, gateway_deps],
            adapter_layer=lambda_.LayerVersion.from_layer_version_arn(
                self, "WebAdapterLayer", lwa_layer_arn(settings.region, settings.lwa_layer_version)
            ),
            environment=gateway_env,
        )
        self._backstop = Backstop(
            self,
            "Backstop",
            handler=backstop_handler,
            code=gateway_code,
            runtime=runtime,
            layers=[sidecar_layer, gateway_deps],
            environment=gateway_environment(
                table=table_name, bucket=bucket_name, manifest_path=manifest_path, service="backstop"
            ),
        )
        self._alarms = MeshAlarms(self, "Alarms", sump_queue=self._actors[SUMP].queue, backstop=self._backstop.function)
        self._grant()
        self._outputs()
        self._acknowledge()

    def _layer(self, id: str, code: lambda_.Code, runtime: lambda_.Runtime, description: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            id,
            code=code,
            compatible_runtimes=[runtime],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description=description[:256],
        )

    def _grant(self) -> None:
        senders = [actor.function for actor in self._actors.values()] + [self._gateway.function]
        for sender in senders:
            for actor in self._actors.values():
                actor.queue.grant_send_messages(sender)
            self._storage.grant_data(sender)
        self._storage.grant_data(self._backstop.function, bucket=False)
        # mq-diagnostic (GW-OPS-3) reads every DLQ's depth and the queues' oldest-message age from CloudWatch
        gateway = self._gateway.function
        for actor in self._actors.values():
            actor.dlq.grant(gateway, "sqs:GetQueueUrl", "sqs:GetQueueAttributes")
        gateway.add_to_role_policy(iam.PolicyStatement(actions=["cloudwatch:GetMetricStatistics"], resources=["*"]))
        acknowledge(
            self._gateway,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:GetMetricStatistics has no resource-level permissions; it only reads metrics.",
        )

    def _outputs(self) -> None:
        CfnOutput(self, "GatewayUrl", value=self._gateway.url, description="Base URL of the gateway API")
        CfnOutput(self, "TableName", value=self._storage.table.table_name, description="Task-store table")
        CfnOutput(self, "BucketName", value=self._storage.bucket.bucket_name, description="Storage bucket")
        for actor in self._actors.values():
            # a stack-level id is the output's key in cdk-outputs.json as it is; inside the actor it would be hashed
            CfnOutput(
                self,
                queue_output_key(actor.name),
                value=actor.queue.queue_url,
                description=f"Queue of actor {actor.name}",
            )

    def _acknowledge(self) -> None:
        acknowledge(
            self,
            f"AwsSolutions-IAM4[{_BASIC_EXECUTION_POLICY}]",
            "AWSLambdaBasicExecutionRole only lets a function write its own CloudWatch logs.",
        )
        acknowledge(
            self,
            f"AwsSolutions-IAM4[{_APIGW_LOGS_POLICY}]",
            "The account-level role API Gateway needs to write stage logs; AWS's policy is the documented one.",
        )
        bucket_resource = self._storage.bucket.node.default_child
        assert isinstance(bucket_resource, CfnElement)
        bucket_id = self.resolve(self.get_logical_id(bucket_resource))
        acknowledge(
            self,
            f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
            "Object keys are per task and per envelope (GW-DATA-7), so object access is granted on the "
            "mesh's own bucket only, with object-level actions only.",
        )

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def actors(self) -> Mapping[str, Actor]:
        return dict(self._actors)

    @property
    def gateway(self) -> Gateway:
        return self._gateway

    @property
    def backstop(self) -> Backstop:
        return self._backstop

    @property
    def alarms(self) -> MeshAlarms:
        """The mesh-wide alarms; each actor's DLQ alarm is ``actors[name].dlq_alarm``."""
        return self._alarms


def queue_output_key(actor: str) -> str:
    """The stack output holding ``actor``'s queue URL: ``QueueUrl`` + the name in PascalCase (``x-sink`` ->
    ``QueueUrlXSink``)."""
    return "QueueUrl" + "".join(part[:1].upper() + part[1:] for part in actor.split("-"))


def _cached_code(builder: DependencyBuilder, directory: Path, pins: Sequence[str]) -> lambda_.Code:
    # The cache key already covers every byte pip wrote; fingerprinting ~30 MB again on every synth is wasted time.
    return lambda_.Code.from_asset(str(directory), asset_hash=builder.key(pins), asset_hash_type=AssetHashType.CUSTOM)


def _validate(manifest: Manifest, sources: SourceLayout, deployed: Sequence[DeployedActor]) -> dict[str, str]:
    """Check everything that can be checked before creating a construct; return each actor's Lambda handler."""
    validate_auth(manifest.gateway.auth)
    sources.validate()
    if (problem := undeployed_crew(manifest.crew_targets())) is not None:
        raise DeploymentError(problem)
    if (missing := manifest.missing_code_dir()) is not None:
        raise DeploymentError(missing)
    handlers: dict[str, str] = {}
    for actor in deployed:
        handlers[actor.name] = crew_handler(actor.name) if actor.crew else SIDECAR_HANDLER
        try:
            check_env_map(actor)
        except ReservedVariableError as exc:
            raise DeploymentError(str(exc)) from None
    return handlers
