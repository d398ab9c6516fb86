"""The actors of one mesh: one :class:`~asya_cdk.actor.Actor` per deployed actor (user actors, then x-sink and
x-sump), placed by :mod:`asya_cdk.placement` (in the mesh's scope, or in nested stacks), each with its environment
(:mod:`asya_deploy.environment` plus ``ASYA_ACCOUNT_ID``, GW-CREATE-7) and the least-privilege grants of its role
(:mod:`asya_cdk.permissions`). Construct ids are the actors' names, so adding or removing one moves no other.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Aws, NestedStack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from asya.envnames import ENV
from asya.flowfile import FLOWS_FILE_NAME
from asya.manifest import Manifest
from asya_cdk.actor import Actor, ActorOverrides
from asya_cdk.assets import SourceLayout
from asya_cdk.meshlayers import MeshLayers
from asya_cdk.permissions import grant_access, role_of
from asya_cdk.placement import ActorGroup, actor_groups, group_code
from asya_deploy.environment import actor_environment

__all__ = ["build_actors"]


def build_actors(
    scope: Construct,
    manifest: Manifest,
    *,
    layout: SourceLayout,
    handlers: Mapping[str, str],
    runtime: lambda_.Runtime,
    layers: MeshLayers,
    table: dynamodb.ITable,
    bucket: s3.IBucket,
    key: kms.IKey | None,
    retention: logs.RetentionDays,
    overrides: ActorOverrides,
    actor_stacks: list[NestedStack],
) -> dict[str, Actor]:
    """Every deployed actor by name (module docstring); the nested stacks made are appended to ``actor_stacks``."""
    deployed = manifest.deployed_actors()
    namespace = manifest.namespace
    code_cache: dict[tuple[str, Path], lambda_.Code] = {}
    shared = ActorGroup(scope=scope, table=table, bucket=bucket, layers=layers.actor_layers)
    placed = actor_groups(scope, [a.name for a in deployed], manifest.deployment, shared, actor_stacks)
    actors: dict[str, Actor] = {}
    for actor, group in zip(deployed, placed, strict=True):
        directory = layout.crew_dir if actor.crew else actor.code_dir
        assert directory is not None  # checked by asya_cdk.checks.check_manifest
        built = Actor(
            group.scope,
            actor.name,
            namespace=namespace,
            actor=actor,
            code=group_code(group.scope, directory, code_cache),
            handler=handlers[actor.name],
            runtime=runtime,
            layers=group.layers,
            environment={
                **actor_environment(
                    manifest,
                    actor,
                    table=group.table.table_name,
                    bucket=group.bucket.bucket_name,
                    flows_file=FLOWS_FILE_NAME if layers.flows is not None else None,
                ),
                ENV.account_id: Aws.ACCOUNT_ID,
            },
            log_retention=retention,
            key=key,
            overrides=overrides,
        )
        grant_access(
            built.function, role_of(actor.name), namespace=namespace, table=group.table, bucket=group.bucket, key=key
        )
        actors[actor.name] = built
    return actors
