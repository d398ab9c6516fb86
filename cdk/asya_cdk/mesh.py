"""``AsyaMesh``: every resource of one ``asya.yaml`` mesh as a single construct, to mount in any CDK stack.

    mesh = AsyaMesh(stack, "Default", manifest="asya.yaml")
    mesh.actors["analyze"].queue, mesh.dynamo_table_interface, mesh.api_gateway, ...

What it creates: the storage (:class:`~asya_cdk.storage.Storage`, or the caller's existing table / bucket), the
layers, one :class:`~asya_cdk.actor.Actor` per deployed actor (user actors, then x-sink and x-sump), the gateway, the
deadline backstop with its timer queue (:class:`~asya_cdk.backstop.Backstop`), the alarms (optionally notifying the
manifest's SNS topic) and the dashboard (:class:`~asya_cdk.observability.MeshObservability`). Grants are the
least-privilege policies :mod:`asya_cdk.permissions` derives from the calls each role declares
(:mod:`asya_deploy.access`).
Every function gets ``ASYA_ACCOUNT_ID`` = the stack's account (GW-CREATE-7) besides the environment of
:mod:`asya_deploy.environment`.

Props (AWS Solutions Constructs style, :mod:`asya_cdk.props`): ``queue_props``, ``dead_letter_queue_props``,
``sqs_event_source_props``, ``lambda_function_props`` (``FunctionOptions``), ``table_props``, ``bucket_props``,
``api_gateway_props``, ``log_group_props`` apply over the mesh's defaults to every resource of their kind;
``existing_table_obj`` / ``existing_bucket_obj`` replace the created table / bucket (not together with the props of the
same resource). A field the manifest or the naming rules own is refused. Every problem (props, manifest, sources,
auth, env maps, region) is collected and raised as one :class:`~asya_cdk.errors.DeploymentError` before the construct
is created (:mod:`asya_cdk.meshchecks`).

Building blocks: :mod:`asya_cdk.meshlayers` (the sidecar, dependency and flows layers), :mod:`asya_cdk.meshactors`
(the actors, placed and granted), :func:`asya_cdk.network.place_functions` (the VPC); this module wires them with the
storage, the gateway, the backstop and the alarms. Every construct keeps its id under the mesh.

Placement (:mod:`asya_cdk.placement`): the manifest's ``deployment.placement`` keeps the actors in the enclosing
stack (``stack``, up to 36 deployed actors) or in ``deployment.actor_stacks`` nested stacks chosen by a hash of each
actor's name (``nested``); either way adding or removing actors never moves another one.

Retained data: with ``deployment.retain_data`` (default) the table and the bucket outlive the stack and the table is
protected from deletion; ``deployment.existing_table`` / ``existing_bucket`` reuse what a deleted stack left.

Data lifecycle and network (docs/deploy.md, "Encryption", "Data lifecycle", "VPC"): the manifest's customer-managed
key, named or created (:mod:`asya_cdk.encryption`), covers the table, queues, bucket, every log group and the backup
vault; ``storage.checkpoints`` / ``versioning`` shape the bucket's lifecycle; ``storage.backup`` adds an AWS Backup
plan (:class:`~asya_cdk.backup.TableBackup`); ``deployment.vpc`` or the ``vpc`` / ``vpc_subnets`` props put every
function of the mesh into a VPC with the endpoints it needs (:class:`~asya_cdk.network.MeshNetwork`).

Edge (docs/deploy.md, "Edge settings as construct props"): ``edge`` (:class:`~asya_cdk.edgeprops.EdgeProps`) sets
the manifest's ``gateway.edge`` (throttles, WAF web ACL, custom domain, reporter keys' secret) from code; the prop wins
field by field (:func:`~asya_cdk.edgeprops.merge_edge`) and :attr:`AsyaMesh.manifest` holds the merged settings.

Grants (CDK style, each returns the ``iam.Grant``): :meth:`AsyaMesh.grant_create_tasks`,
:meth:`AsyaMesh.grant_read_tasks` (``execute-api:Invoke`` on the task routes; gateway auth ``iam`` only) and
:meth:`AsyaMesh.grant_send` (send to one actor's queue).

Ids are a contract: mount the construct as ``"Default"`` to keep the logical ids of the ``AsyaStack`` of earlier
versions. The construct emits no ``CfnOutput`` and reads no context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from aws_cdk import Aws, NestedStack, Tags
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from asya import naming
from asya.capacity import account_quotas, backstop_reservation
from asya.envnames import ENV
from asya.manifest import Manifest
from asya_cdk.actor import Actor, ActorOverrides
from asya_cdk.assets import GATEWAY_MANIFEST_FILE, SourceLayout, render_manifest_json, stage_gateway_asset
from asya_cdk.backstop import Backstop
from asya_cdk.backup import TableBackup
from asya_cdk.capacityplan import apply_plan, checked_plan, planned_edge
from asya_cdk.dependencies import DependencyBuilder
from asya_cdk.edgeprops import EdgeProps
from asya_cdk.encryption import encrypt_log_groups, mesh_key
from asya_cdk.errors import DeploymentError
from asya_cdk.gateway import Gateway
from asya_cdk.grants import grant_task_routes
from asya_cdk.installed import installed_sources
from asya_cdk.lwa import DEFAULT_LWA_VERSION
from asya_cdk.meshactors import build_actors
from asya_cdk.meshchecks import check_mesh
from asya_cdk.meshlayers import mesh_layers
from asya_cdk.nag import acknowledge
from asya_cdk.network import MeshNetwork, place_functions
from asya_cdk.observability import MeshObservability, retention_days
from asya_cdk.permissions import grant_access
from asya_cdk.props import given_fields
from asya_cdk.storage import Storage
from asya_deploy import access
from asya_deploy.environment import capacity_environment, flows_file_text, gateway_environment

__all__ = ["DEFAULT_BACKSTOP_HANDLER", "AsyaMesh", "default_sources"]

DEFAULT_BACKSTOP_HANDLER: Final = "asya_gateway.backstop.lambda_handler"
_BASIC_EXECUTION_POLICY: Final = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def default_sources() -> SourceLayout:
    """The runtime code that is installed: the checkout of an editable install, else (a wheel) a tree staged from
    site-packages under ``./.asya/source`` of the working directory (:mod:`asya_cdk.installed`)."""
    return installed_sources(staging=Path.cwd() / ".asya" / "source")


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
        backstop_handler: str = DEFAULT_BACKSTOP_HANDLER,
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        edge: EdgeProps | None = None,
    ) -> None:
        layout = sources or default_sources()
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
        checked = check_mesh(
            scope,
            manifest,
            layout=layout,
            runtime=runtime,
            hooks=hooks,
            existing={"existing_table_obj": existing_table_obj, "existing_bucket_obj": existing_bucket_obj},
            vpc_given=vpc is not None,
            subnets_given=vpc_subnets is not None,
            web_adapter_given=web_adapter_layer is not None,
            lwa_layer_version=lwa_layer_version,
            edge=edge,
        )
        loaded, runtime, handlers = checked.manifest, checked.runtime, checked.handlers
        capacity = checked_plan(loaded)  # refuses a declared target the account's quotas cannot serve
        super().__init__(scope, id)
        self._manifest = loaded
        namespace = loaded.namespace
        Tags.of(self).add("asya:namespace", namespace)
        key = mesh_key(self, loaded.storage, namespace=namespace, retain=loaded.deployment.retain_data)
        self._key_obj = key
        retention = retention_days(loaded.observability.log_retention_days)
        function_extra = given_fields(lambda_function_props)
        log_extra = given_fields(log_group_props)

        deployment = loaded.deployment
        if deployment.existing_table:
            existing_table_obj = dynamodb.Table.from_table_name(self, "ExistingTable", naming.table_name(namespace))
        if deployment.existing_bucket is not None:
            existing_bucket_obj = s3.Bucket.from_bucket_name(self, "ExistingBucket", deployment.existing_bucket)
        self._storage = Storage(
            self,
            "Storage",
            namespace=namespace,
            key=key,
            table_props=given_fields(table_props),
            bucket_props=given_fields(bucket_props),
            existing_table=existing_table_obj,
            existing_bucket=existing_bucket_obj,
            retain_data=deployment.retain_data,
            checkpoints=loaded.storage.checkpoints,
            versioning=loaded.storage.versioning,
            noncurrent_expire_days=loaded.storage.noncurrent_expire_days,
        )
        table, bucket = self._storage.table, self._storage.bucket
        self._backup = (
            None
            if loaded.storage.backup is None
            else TableBackup(
                self,
                "Backup",
                namespace=namespace,
                table=table,
                config=loaded.storage.backup,
                key=key,
                retain=deployment.retain_data,
            )
        )

        # programs too large for the 4 KB environment travel in a layer of their own (asya.flowfile)
        flows_json = flows_file_text(loaded)
        built_layers = mesh_layers(
            self, layout=layout, runtime=runtime, dependencies=dependencies, locks=checked.locks, flows_json=flows_json
        )
        sidecar_layer, gateway_deps = built_layers.sidecar, built_layers.gateway_dependencies

        overrides = ActorOverrides(
            queue=given_fields(queue_props),
            dead_letter_queue=given_fields(dead_letter_queue_props),
            event_source=given_fields(sqs_event_source_props),
            function=function_extra,
            log_group=log_extra,
        )
        self._actor_stacks: list[NestedStack] = []
        self._actors = build_actors(
            self,
            loaded,
            layout=layout,
            handlers=handlers,
            runtime=runtime,
            layers=built_layers,
            table=table,
            bucket=bucket,
            key=key,
            retention=retention,
            overrides=overrides,
            actor_stacks=self._actor_stacks,
        )

        apply_plan(capacity, {name: built.function for name, built in self._actors.items()}, table)

        gateway_dir = stage_gateway_asset(
            gateway_dir=layout.gateway_dir,
            manifest_json=render_manifest_json(loaded),
            staging_dir=layout.staging_dir,
        )
        gateway_code = lambda_.Code.from_asset(str(gateway_dir))
        manifest_path = f"/var/task/{GATEWAY_MANIFEST_FILE}"
        adapter = web_adapter_layer or lambda_.LayerVersion.from_layer_version_arn(
            self, "WebAdapterLayer", str(checked.adapter_arn)
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
                **capacity_environment(loaded),
            },
            log_retention=retention,
            api_overrides=given_fields(api_gateway_props),
            edge=planned_edge(loaded.gateway.edge, capacity),
            tracing=loaded.defaults.tracing,
            stream_reserved_concurrency=loaded.gateway.stream_reserved_concurrency,
            key=key,
        )
        backstop_reserved = backstop_reservation(loaded)  # GW-BACK-7: never starved by the actors it watches
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
            queue_overrides=overrides.queue,
            dead_letter_queue_overrides=overrides.dead_letter_queue,
            tracing=loaded.defaults.tracing,
            reserved_concurrency=backstop_reserved,
            timer_concurrency=backstop_reserved - 1 if backstop_reserved else None,
        )
        grant_access(self._gateway.function, access.GATEWAY, namespace=namespace, table=table, bucket=bucket, key=key)
        # the stream function serves MCP and A2A, which create tasks too: the same grants as the main function
        grant_access(
            self._gateway.stream_function, access.GATEWAY, namespace=namespace, table=table, bucket=bucket, key=key
        )
        grant_access(self._backstop.function, access.BACKSTOP, namespace=namespace, table=table, bucket=bucket, key=key)
        self._observability = MeshObservability(
            self,
            "Alarms",
            namespace=namespace,
            actors=list(self._actors.values()),
            backstop=self._backstop,
            gateway=self._gateway,
            alarm_topic_arn=loaded.observability.alarm_topic_arn,
            dashboard=loaded.observability.dashboard,
            account_concurrency=int(account_quotas(loaded)["lambda_concurrency"]),
        )
        self._network = place_functions(self, loaded, key=key, vpc=vpc, vpc_subnets=vpc_subnets)
        # every log group and function of the mesh, whichever construct made it
        encrypt_log_groups((c for c in self.node.find_all() if isinstance(c, logs.LogGroup)), key)
        self._acknowledge()

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
    def network(self) -> MeshNetwork | None:
        """The VPC, security groups and endpoints; ``None`` when the functions run outside a VPC."""
        return self._network

    @property
    def backup(self) -> TableBackup | None:
        """The table's AWS Backup plan; ``None`` without ``storage.backup``."""
        return self._backup

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

    def grant_create_tasks(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` create tasks through the gateway (``execute-api:Invoke`` on ``POST /api/v1/mesh``)."""
        return grant_task_routes(
            self.api_gateway,
            grantee,
            kind="create",
            auth_mode=self._manifest.gateway.auth.mode,
            method="grant_create_tasks",
        )

    def grant_read_tasks(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read tasks through the gateway: list, status, stream and result (``GET /api/v1/mesh/*``)."""
        return grant_task_routes(
            self.api_gateway,
            grantee,
            kind="read",
            auth_mode=self._manifest.gateway.auth.mode,
            method="grant_read_tasks",
        )

    def grant_send(self, actor: str, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` send envelopes to ``actor``'s queue (and use the mesh's key for it, when there is one)."""
        built = self._actors.get(actor)
        if built is None:
            raise DeploymentError(
                f"grant_send: actor {actor!r} is not deployed by this mesh; use one of {sorted(self._actors)}"
            )
        return built.queue.grant_send_messages(grantee)
