"""The repository's own stack: a thin :class:`~aws_cdk.Stack` around one :class:`~asya_cdk.mesh.AsyaMesh` (mounted as
``"Default"``, so its resources keep the logical ids of earlier versions), plus the outputs.

Context ``asya:deleteData=true`` (``asya destroy --delete-data``) synthesizes the manifest with
``deployment.retain_data: false``.

Outputs: ``GatewayUrl``, ``TableName``, ``BucketName``, ``QueueUrlPrefix`` (``https://sqs.{region}.{suffix}/
{account}/asya-{ns}-``: append an actor's name) and, while the actors live in this stack, one ``QueueUrl{Actor}`` per
actor (a split mesh would exceed CloudFormation's 200 outputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Aws, CfnOutput, Environment, Stack
from constructs import Construct

from asya import naming
from asya.manifest import Manifest
from asya_cdk.actor import Actor
from asya_cdk.assets import SourceLayout
from asya_cdk.dependencies import DependencyBuilder
from asya_cdk.mesh import AsyaMesh
from asya_cdk.settings import DeploySettings

__all__ = ["AsyaStack", "default_stack_name", "queue_output_key"]


def default_stack_name(manifest: Manifest) -> str:
    return f"asya-{manifest.namespace}"


class AsyaStack(Stack):
    """Every resource of one mesh, with its outputs."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        manifest: Manifest,
        sources: SourceLayout,
        settings: DeploySettings,
        dependencies: DependencyBuilder | None = None,
        **stack_props: Any,
    ) -> None:
        stack_props.setdefault("env", Environment(region=settings.region))
        stack_props.setdefault("description", f"asya mesh {manifest.namespace} (asya-serverless)")
        super().__init__(scope, id, **stack_props)
        if settings.delete_data:
            # asya destroy --delete-data: deploy the stack once more with data deletable, then delete it
            deployment = manifest.deployment.model_copy(update={"retain_data": False})
            manifest = manifest.model_copy(update={"deployment": deployment})
        self._mesh = AsyaMesh(
            self,
            "Default",
            manifest=manifest,
            runtime=settings.runtime,
            lwa_layer_version=settings.lwa_layer_version,
            sources=sources,
            dependencies=dependencies,
        )
        mesh = self._mesh
        CfnOutput(self, "GatewayUrl", value=mesh.api_gateway.url, description="Base URL of the gateway API")
        CfnOutput(self, "TableName", value=mesh.dynamo_table_interface.table_name, description="Task-store table")
        CfnOutput(self, "BucketName", value=mesh.s3_bucket_interface.bucket_name, description="Storage bucket")
        prefix = naming.queue_name(manifest.namespace, "")
        CfnOutput(
            self,
            "QueueUrlPrefix",
            value=f"https://sqs.{Aws.REGION}.{Aws.URL_SUFFIX}/{Aws.ACCOUNT_ID}/{prefix}",
            description="Queue URL of an actor: this prefix + the actor's name",
        )
        if not mesh.actor_stacks:
            for actor in mesh.actors.values():
                # a stack-level id is the output's key in cdk-outputs.json as it is; inside the actor it would be hashed
                CfnOutput(
                    self,
                    queue_output_key(actor.name),
                    value=actor.queue.queue_url,
                    description=f"Queue of actor {actor.name}",
                )

    @property
    def mesh(self) -> AsyaMesh:
        return self._mesh

    @property
    def manifest(self) -> Manifest:
        return self._mesh.manifest

    @property
    def actors(self) -> Mapping[str, Actor]:
        return self._mesh.actors


def queue_output_key(actor: str) -> str:
    """The stack output holding ``actor``'s queue URL: ``QueueUrl`` + the name in PascalCase (``x-sink`` ->
    ``QueueUrlXSink``)."""
    return "QueueUrl" + "".join(part[:1].upper() + part[1:] for part in actor.split("-"))
