"""Where a mesh's actors live (issue 19 item 3): in the mesh's own stack up to :data:`INLINE_ACTORS` deployed actors,
else in nested stacks ``Actors0``, ``Actors1``, ... of ``actors_per_stack`` (default :data:`DEFAULT_ACTORS_PER_STACK`).

CloudFormation allows 500 resources per stack and an actor takes 11 (queue, DLQ, two queue policies, log group, role,
policy, function, event source mapping, two alarms). A nested stack takes the table ARN, the bucket ARN and name and
the layer ARNs as its own parameters and imports them, so its policies and cdk-nag findings name them locally
(``<BucketArn>/payloads/*``) and no cross-stack reference is generated per actor. CDK binds a ``Code`` asset to the
first stack that uses it, so :func:`group_code` keeps one per directory and stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import CfnParameter, NestedStack, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from asya_cdk.assets import ASSET_EXCLUDES

__all__ = [
    "DEFAULT_ACTORS_PER_STACK",
    "INLINE_ACTORS",
    "MAX_ACTORS_PER_STACK",
    "ActorGroup",
    "actor_groups",
    "group_code",
]

#: Deployed actors that stay in the enclosing stack (11 resources each, with ~60 shared ones, under 500).
INLINE_ACTORS: Final = 36
#: Actors per nested stack when the mesh is split.
DEFAULT_ACTORS_PER_STACK: Final = 40
MAX_ACTORS_PER_STACK: Final = 42


@dataclass(frozen=True, slots=True)
class ActorGroup:
    """What the actors of one stack use: the construct they go into, the table, the bucket, the layers."""

    scope: Construct
    table: dynamodb.ITable
    bucket: s3.IBucket
    layers: tuple[lambda_.ILayerVersion, ...]


def actor_groups(
    mesh: Construct, count: int, per_stack: int | None, shared: ActorGroup, stacks: list[NestedStack]
) -> list[ActorGroup]:
    """Where each of ``count`` actors goes: ``shared`` (the mesh itself), or nested stacks of ``per_stack`` actors,
    appended to ``stacks``."""
    if per_stack is None and count <= INLINE_ACTORS:
        return [shared] * count
    size = per_stack or DEFAULT_ACTORS_PER_STACK
    groups: list[ActorGroup] = []
    for index in range(count):
        if index % size == 0:
            groups.append(_nested_group(mesh, index // size, shared, stacks))
        else:
            groups.append(groups[-1])
    return groups


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
