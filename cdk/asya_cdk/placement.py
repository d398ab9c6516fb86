"""Where a mesh's actors live, by the manifest's ``deployment.placement``:

- ``stack`` (default): in the mesh's own stack, at most :data:`~asya.manifest.blocks.MAX_STACK_ACTORS` deployed
  actors. A larger mesh is refused at synthesis (:func:`placement_problems`), never moved into nested stacks: the
  actors' logical ids would change, and their fixed-name queues cannot be created while the old ones exist.
- ``nested``: in ``deployment.actor_stacks`` nested stacks ``Actors0`` .. ``Actors{n-1}``; an actor goes into the one
  its name hashes to (:func:`actor_bucket`, SHA-256 of the name modulo the count). Adding or removing an actor never
  moves another one; a nested stack with no actor is not created. ``actor_stacks`` is fixed from the first
  deployment: changing it moves actors. A nested stack holds at most :data:`MAX_ACTORS_PER_STACK` actors; a mesh
  whose names crowd one beyond it is refused with the names and the fix.

CloudFormation allows 500 resources per stack and an actor takes 12 (queue, DLQ, two queue policies, log group, role,
policy, function, event source mapping, three alarms: DLQ, age, and its function's errors and throttles, which
:mod:`asya_cdk.operator_alarms` puts into the actor's nested stack). A nested stack takes the table ARN, the bucket
ARN and name and the layer ARNs as its own parameters and imports them, so its policies and cdk-nag findings name
them locally (``<BucketArn>/payloads/*``) and no cross-stack reference is generated per actor. CDK binds a ``Code``
asset to the first stack that uses it, so :func:`group_code` keeps one per directory and stack.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import CfnParameter, NestedStack, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from asya.manifest.blocks import MAX_STACK_ACTORS, DeploymentConfig
from asya_cdk.assets import ASSET_EXCLUDES

__all__ = [
    "MAX_ACTORS_PER_STACK",
    "ActorGroup",
    "actor_bucket",
    "actor_groups",
    "group_code",
    "placement_problems",
]

#: Actors one nested stack holds: 12 resources each, under CloudFormation's 500 with a margin.
MAX_ACTORS_PER_STACK: Final = 40


@dataclass(frozen=True, slots=True)
class ActorGroup:
    """What the actors of one stack use: the construct they go into, the table, the bucket, the layers."""

    scope: Construct
    table: dynamodb.ITable
    bucket: s3.IBucket
    layers: tuple[lambda_.ILayerVersion, ...]


def actor_bucket(name: str, stacks: int) -> int:
    """The nested stack of actor ``name`` among ``stacks``: a hash of the name alone, so it never changes with the
    other actors."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") % stacks


def placement_problems(names: Sequence[str], deployment: DeploymentConfig) -> list[str]:
    """Why these deployed actors cannot be placed by ``deployment``'s rule (``[]``: they can)."""
    if deployment.placement == "stack":
        if len(names) <= MAX_STACK_ACTORS:
            return []
        return [
            f"deployment.placement: 'stack' holds at most {MAX_STACK_ACTORS} deployed actors (crew included; "
            f"CloudFormation's 500 resources per stack), this mesh has {len(names)}; set deployment.placement: nested. "
            "A mesh already deployed with placement 'stack' must be deployed afresh (docs/deploy.md, Placement): its "
            "queues keep fixed names and cannot move into nested stacks in place"
        ]
    crowded: dict[int, list[str]] = {}
    for name in names:
        crowded.setdefault(actor_bucket(name, deployment.actor_stacks), []).append(name)
    return [
        f"deployment.actor_stacks: nested stack Actors{bucket} would hold {len(members)} actors, over "
        f"{MAX_ACTORS_PER_STACK} (500 resources per stack): {', '.join(members)}; a new mesh needs more actor_stacks, "
        "a deployed one must be deployed afresh with more (changing the count moves actors)"
        for bucket, members in sorted(crowded.items())
        if len(members) > MAX_ACTORS_PER_STACK
    ]


def actor_groups(
    mesh: Construct,
    names: Sequence[str],
    deployment: DeploymentConfig,
    shared: ActorGroup,
    stacks: list[NestedStack],
) -> list[ActorGroup]:
    """Where each actor of ``names`` goes: ``shared`` (the mesh itself) or its nested stack, appended to ``stacks``
    in stack order. Call :func:`placement_problems` first."""
    if deployment.placement == "stack":
        return [shared] * len(names)
    buckets = [actor_bucket(name, deployment.actor_stacks) for name in names]
    groups: dict[int, ActorGroup] = {}
    for bucket in sorted(set(buckets)):
        groups[bucket] = _nested_group(mesh, bucket, shared, stacks)
    return [groups[bucket] for bucket in buckets]


def _nested_group(mesh: Construct, number: int, shared: ActorGroup, stacks: list[NestedStack]) -> ActorGroup:
    values = {
        "TableArn": shared.table.table_arn,
        "BucketArn": shared.bucket.bucket_arn,
        "BucketName": shared.bucket.bucket_name,
        **{f"Layer{i}": layer.layer_version_arn for i, layer in enumerate(shared.layers)},
    }
    nested = NestedStack(mesh, f"Actors{number}", description=f"asya mesh actors, group {number}", parameters=values)
    stacks.append(nested)
    param = {name: CfnParameter(nested, name, type="String").value_as_string for name in values}
    return ActorGroup(
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


def group_code(scope: Construct, directory: Path, cache: dict[tuple[str, Path], lambda_.Code]) -> lambda_.Code:
    """One asset per directory and stack (CDK binds a ``Code`` to the first stack that uses it)."""
    key = (Stack.of(scope).node.path, directory)
    if key not in cache:
        cache[key] = lambda_.Code.from_asset(str(directory), exclude=list(ASSET_EXCLUDES))
    return cache[key]
