"""What a new cloud assembly changes in a running artifact mesh, checked as CloudFormation would check the stack update
before it changes anything, and the resource part of applying it (``ArtifactMesh.update`` applies the functions and
the triggers).

:func:`plan_update` compares two :class:`~asya_local.artifact.model.MeshSpec`:

- **queues** (by ARN, so a renamed queue is a removal and an addition, as CloudFormation replaces it): added ones are
  created, removed ones deleted with what they hold, changed attributes set (an attribute the new template drops goes
  back to SQS's default);
- **the table and the bucket** (by logical id) keep their data: a change that needs a replacement is a
  :class:`ReplacementError` naming the logical id and the property, because CloudFormation cannot replace a resource
  with a custom name and fails the update: the table's ``TableName``, ``KeySchema`` or ``LocalSecondaryIndexes``, the
  bucket's ``BucketName``, or the resource gone from the template (renamed or dropped; both hold the mesh's state).
  The table may gain or lose one global secondary index per update (CloudFormation's own limit) and change its
  billing, stream and TTL; an index changed in place is refused as CloudFormation refuses it (:class:`UpdateError`).
  The bucket's encryption, public access block and lifecycle rules are set again;
- **functions** (by ARN): added, removed, and changed in code or layers (compared by asset, so a function whose
  asset hash is unchanged keeps running, as ``UpdateFunctionCode`` is not called for it), environment, handler,
  runtime, timeout or memory; their role policies apart;
- **secrets** added and removed (a kept secret keeps its value), **event sources**, **schedules** and the API's
  **methods** (reported: the mesh restarts every mapping and schedule and reroutes the API in any case).

Nothing here touches a function or a poller: :func:`apply_resources` makes the changes to moto that must precede the
new functions (queues, tables, buckets, secrets created or updated) and :func:`remove_resources` the deletions that
follow them, as CloudFormation deletes removed resources in its clean-up phase.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from asya_local.artifact.model import BucketSpec, EventSource, FunctionSpec, MeshSpec, QueueSpec, TableSpec
from asya_local.artifact.provision import configure_bucket, create_bucket, create_table, secrets_client
from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = ["MeshUpdate", "ReplacementError", "UpdateError", "apply_resources", "plan_update", "remove_resources"]

#: What SQS sets when a queue attribute is not given (an attribute the new template drops returns to it).
_QUEUE_DEFAULTS: Final[Mapping[str, str]] = {
    "VisibilityTimeout": "30",
    "MessageRetentionPeriod": "345600",
    "DelaySeconds": "0",
    "MaximumMessageSize": "262144",
    "ReceiveMessageWaitTimeSeconds": "0",
    "SqsManagedSseEnabled": "true",
    "RedrivePolicy": "",
}
#: Table properties whose change replaces the table (CloudFormation's "Update requires: Replacement").
_TABLE_REPLACING: Final = ("TableName", "KeySchema", "LocalSecondaryIndexes")
#: Queue attributes fixed at creation: a change under the same name cannot be applied.
_QUEUE_FIXED: Final = ("FifoQueue",)


class UpdateError(LocalModeError):
    """A stack update the artifact mesh refuses before changing anything: ``logical_id`` and ``prop`` name the
    resource and the property (``prop`` is empty when the resource itself is gone)."""

    def __init__(self, message: str, *, logical_id: str, prop: str) -> None:
        super().__init__(message)
        self.logical_id = logical_id
        self.prop = prop


class ReplacementError(UpdateError):
    """The update would replace the table or the bucket: CloudFormation fails it (a custom-named resource cannot be
    replaced), and the mesh's state lives in them."""


@dataclass(frozen=True)
class MeshUpdate:
    """What :func:`plan_update` found; ``old`` and ``new`` are the two specs."""

    old: MeshSpec
    new: MeshSpec
    queues_added: tuple[QueueSpec, ...] = ()
    queues_removed: tuple[QueueSpec, ...] = ()
    #: (old, new) of every kept queue whose attributes change
    queues_changed: tuple[tuple[QueueSpec, QueueSpec], ...] = ()
    tables_added: tuple[TableSpec, ...] = ()
    tables_changed: tuple[tuple[TableSpec, TableSpec], ...] = ()
    buckets_added: tuple[BucketSpec, ...] = ()
    buckets_changed: tuple[tuple[BucketSpec, BucketSpec], ...] = ()
    functions_added: tuple[FunctionSpec, ...] = ()
    functions_removed: tuple[FunctionSpec, ...] = ()
    #: the new spec of every kept function whose code, layers or configuration changed
    functions_changed: tuple[FunctionSpec, ...] = ()
    #: the new spec of every kept function whose role policies changed
    policies_changed: tuple[FunctionSpec, ...] = ()
    secrets_added: tuple[str, ...] = ()
    secrets_removed: tuple[str, ...] = ()
    event_sources_added: tuple[str, ...] = ()
    event_sources_removed: tuple[str, ...] = ()
    event_sources_changed: tuple[str, ...] = ()
    schedules_changed: bool = False
    methods_changed: bool = False

    def summary(self) -> dict[str, list[str]]:
        """Logical ids (queue and secret names) by kind of change, the empty kinds left out."""
        found = {
            "queues added": [q.name for q in self.queues_added],
            "queues removed": [q.name for q in self.queues_removed],
            "queues changed": [new.name for _, new in self.queues_changed],
            "tables added": [t.logical_id for t in self.tables_added],
            "tables changed": [new.logical_id for _, new in self.tables_changed],
            "buckets added": [b.logical_id for b in self.buckets_added],
            "buckets changed": [new.logical_id for _, new in self.buckets_changed],
            "functions added": [f.logical_id for f in self.functions_added],
            "functions removed": [f.logical_id for f in self.functions_removed],
            "functions changed": [f.logical_id for f in self.functions_changed],
            "policies changed": [f.logical_id for f in self.policies_changed],
            "secrets added": list(self.secrets_added),
            "secrets removed": list(self.secrets_removed),
            "event sources added": list(self.event_sources_added),
            "event sources removed": list(self.event_sources_removed),
            "event sources changed": list(self.event_sources_changed),
        }
        return {kind: sorted(names) for kind, names in found.items() if names}


def plan_update(old: MeshSpec, new: MeshSpec) -> MeshUpdate:
    """The changes from ``old`` to ``new``; raises :class:`ReplacementError` or :class:`UpdateError` (module)."""
    tables_added, tables_changed = _tables(old.tables, new.tables)
    buckets_added, buckets_changed = _buckets(old.buckets, new.buckets)
    if bool(old.methods) != bool(new.methods):
        raise UpdateError(
            "the new assembly " + ("adds" if new.methods else "removes") + " the REST API: the artifact mesh updates "
            "an API's methods, not the API itself; start a new mesh",
            logical_id="RestApi",
            prop="",
        )
    if old.edge_limits != new.edge_limits:
        raise UpdateError(
            "the new assembly changes the API stage's throttle or gateway responses, which the artifact mesh sets "
            "only at start; start a new mesh",
            logical_id="Stage",
            prop="MethodSettings",
        )
    for arn in old.queues.keys() & new.queues.keys():
        for attribute in _QUEUE_FIXED:
            before, after = old.queues[arn].attributes.get(attribute), new.queues[arn].attributes.get(attribute)
            if before != after:
                raise UpdateError(
                    f"queue {new.queues[arn].logical_id}: {attribute} changes from {before} to {after} under the same "
                    "name; SQS fixes it at creation",
                    logical_id=new.queues[arn].logical_id,
                    prop=attribute,
                )
    kept = old.functions.keys() & new.functions.keys()
    old_sources = {s.logical_id: s for s in old.event_sources}
    new_sources = {s.logical_id: s for s in new.event_sources}
    return MeshUpdate(
        old=old,
        new=new,
        queues_added=tuple(q for arn, q in new.queues.items() if arn not in old.queues),
        queues_removed=tuple(q for arn, q in old.queues.items() if arn not in new.queues),
        queues_changed=tuple(
            (old.queues[arn], new.queues[arn])
            for arn in sorted(old.queues.keys() & new.queues.keys())
            if old.queues[arn].attributes != new.queues[arn].attributes
        ),
        tables_added=tables_added,
        tables_changed=tables_changed,
        buckets_added=buckets_added,
        buckets_changed=buckets_changed,
        functions_added=tuple(f for arn, f in new.functions.items() if arn not in old.functions),
        functions_removed=tuple(f for arn, f in old.functions.items() if arn not in new.functions),
        functions_changed=tuple(
            new.functions[arn] for arn in sorted(kept) if _deployed(old.functions[arn]) != _deployed(new.functions[arn])
        ),
        policies_changed=tuple(
            new.functions[arn] for arn in sorted(kept) if old.functions[arn].policies != new.functions[arn].policies
        ),
        secrets_added=tuple(s for s in new.secrets if s not in old.secrets),
        secrets_removed=tuple(s for s in old.secrets if s not in new.secrets),
        event_sources_added=tuple(sorted(new_sources.keys() - old_sources.keys())),
        event_sources_removed=tuple(sorted(old_sources.keys() - new_sources.keys())),
        event_sources_changed=tuple(
            sorted(lid for lid in old_sources.keys() & new_sources.keys() if _source_differs(old, new, lid))
        ),
        schedules_changed=old.schedules != new.schedules,
        methods_changed=old.methods != new.methods,
    )


def _deployed(function: FunctionSpec) -> tuple[Any, ...]:
    """What ``UpdateFunctionCode`` and ``UpdateFunctionConfiguration`` would change: assets by their hash (the
    directory name), never by the assembly they sit in."""
    return (
        function.handler,
        function.runtime,
        function.code_dir.name,
        tuple(layer.name for layer in function.layer_dirs),
        function.external_layers,
        function.environment,
        function.timeout,
        function.memory,
    )


def _source_differs(old: MeshSpec, new: MeshSpec, logical_id: str) -> bool:
    before = next(s for s in old.event_sources if s.logical_id == logical_id)
    after = next(s for s in new.event_sources if s.logical_id == logical_id)
    return _comparable(before) != _comparable(after)


def _comparable(source: EventSource) -> tuple[Any, ...]:
    return (
        source.function,
        source.queue_arn,
        source.batch_size,
        source.batching_window,
        source.report_batch_item_failures,
        source.max_concurrency,
        source.enabled,
    )


def _tables(
    old: list[TableSpec], new: list[TableSpec]
) -> tuple[tuple[TableSpec, ...], tuple[tuple[TableSpec, TableSpec], ...]]:
    by_id = {table.logical_id: table for table in new}
    changed: list[tuple[TableSpec, TableSpec]] = []
    for before in old:
        after = by_id.get(before.logical_id)
        if after is None:
            raise ReplacementError(
                f"table {before.logical_id} ({before.name}) is gone from the new template (renamed or dropped): "
                "CloudFormation would replace or orphan the table that holds every task; the update is refused",
                logical_id=before.logical_id,
                prop="",
            )
        for prop in _TABLE_REPLACING:
            was, now = before.create_kwargs.get(prop), after.create_kwargs.get(prop)
            if was != now:
                raise ReplacementError(
                    f"table {before.logical_id}: {prop} changes from {json.dumps(was)} to {json.dumps(now)}, which "
                    "replaces the table; CloudFormation fails the update (a custom-named resource cannot be "
                    "replaced), and its items would be lost",
                    logical_id=before.logical_id,
                    prop=prop,
                )
        _check_indexes(before, after)
        if before != after:
            changed.append((before, after))
    known = {table.logical_id for table in old}
    return tuple(t for t in new if t.logical_id not in known), tuple(changed)


def _indexes(table: TableSpec) -> dict[str, dict[str, Any]]:
    return {str(index["IndexName"]): index for index in table.create_kwargs.get("GlobalSecondaryIndexes") or []}


def _check_indexes(before: TableSpec, after: TableSpec) -> None:
    was, now = _indexes(before), _indexes(after)
    for name in was.keys() & now.keys():
        if {k: v for k, v in was[name].items() if k != "ProvisionedThroughput"} != {
            k: v for k, v in now[name].items() if k != "ProvisionedThroughput"
        }:
            raise UpdateError(
                f"table {after.logical_id}: global secondary index {name} changes its key schema or projection; "
                "CloudFormation allows only its provisioned throughput to change (remove the index in one deploy "
                "and add it back in the next)",
                logical_id=after.logical_id,
                prop="GlobalSecondaryIndexes",
            )
    moves = len(was.keys() ^ now.keys())
    if moves > 1:
        raise UpdateError(
            f"table {after.logical_id}: {moves} global secondary indexes are added or removed; CloudFormation "
            "creates or deletes one per update",
            logical_id=after.logical_id,
            prop="GlobalSecondaryIndexes",
        )


def _buckets(
    old: list[BucketSpec], new: list[BucketSpec]
) -> tuple[tuple[BucketSpec, ...], tuple[tuple[BucketSpec, BucketSpec], ...]]:
    by_id = {bucket.logical_id: bucket for bucket in new}
    changed: list[tuple[BucketSpec, BucketSpec]] = []
    for before in old:
        after = by_id.get(before.logical_id)
        if after is None:
            raise ReplacementError(
                f"bucket {before.logical_id} ({before.name}) is gone from the new template (renamed or dropped): "
                "CloudFormation would replace or orphan the bucket that holds checkpoints, paused tasks and flow "
                "programs; the update is refused",
                logical_id=before.logical_id,
                prop="",
            )
        if before.name != after.name:
            raise ReplacementError(
                f"bucket {before.logical_id}: BucketName changes from {before.name} to {after.name}, which replaces "
                "the bucket; CloudFormation fails the update (a custom-named resource cannot be replaced), and its "
                "objects would be lost",
                logical_id=before.logical_id,
                prop="BucketName",
            )
        if before.properties != after.properties:
            changed.append((before, after))
    known = {bucket.logical_id for bucket in old}
    return tuple(b for b in new if b.logical_id not in known), tuple(changed)


# -- applying the resource part ----------------------------------------------------------------------------------


def apply_resources(
    change: MeshUpdate, *, sqs: SQSClient, dynamodb: DynamoDBClient, s3: S3Client, region: str, endpoint: str
) -> None:
    """Create and update what the new functions need (queues, tables, buckets, secrets); deletes nothing."""
    urls = {q.arn: _url(endpoint, q) for q in change.new.queues.values()}
    for queue in change.queues_added:
        attributes = {k: v for k, v in queue.attributes.items() if k != "RedrivePolicy"}
        sqs.create_queue(QueueName=queue.name, Attributes=attributes)  # type: ignore[arg-type]
    # redrive after every queue exists: a new queue's DLQ may be new too
    for queue in change.queues_added:
        if "RedrivePolicy" in queue.attributes:
            sqs.set_queue_attributes(
                QueueUrl=urls[queue.arn], Attributes={"RedrivePolicy": queue.attributes["RedrivePolicy"]}
            )
    for before, after in change.queues_changed:
        attributes = {
            key: after.attributes.get(key, _QUEUE_DEFAULTS.get(key, ""))
            for key in before.attributes.keys() | after.attributes.keys()
            if before.attributes.get(key) != after.attributes.get(key)
        }
        sqs.set_queue_attributes(QueueUrl=urls[after.arn], Attributes=attributes)  # type: ignore[arg-type]
    for table in change.tables_added:
        create_table(dynamodb, table)
    for table_before, table_after in change.tables_changed:
        _update_table(dynamodb, table_before, table_after)
    for bucket in change.buckets_added:
        create_bucket(s3, bucket, region)
    for bucket_before, bucket_after in change.buckets_changed:
        configure_bucket(s3, bucket_after, previous=bucket_before)
    if change.secrets_added:
        import secrets

        client = secrets_client(sqs, region)
        for name in change.secrets_added:
            client.create_secret(Name=name, SecretString=secrets.token_urlsafe(30))


def remove_resources(change: MeshUpdate, *, sqs: SQSClient, region: str, endpoint: str) -> None:
    """Delete the queues (messages included, as CloudFormation does) and secrets the new template dropped."""
    for queue in change.queues_removed:
        sqs.delete_queue(QueueUrl=_url(endpoint, queue))
    if change.secrets_removed:
        client = secrets_client(sqs, region)
        for name in change.secrets_removed:
            client.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)


def _url(endpoint: str, queue: QueueSpec) -> str:
    from asya_local.moto_server import MOTO_ACCOUNT_ID

    return f"{endpoint.rstrip('/')}/{MOTO_ACCOUNT_ID}/{queue.name}"


def _update_table(dynamodb: DynamoDBClient, before: TableSpec, after: TableSpec) -> None:
    name = after.name
    was, now = _indexes(before), _indexes(after)
    updates: list[dict[str, Any]] = [{"Delete": {"IndexName": index}} for index in sorted(was.keys() - now.keys())]
    updates += [{"Create": now[index]} for index in sorted(now.keys() - was.keys())]
    if updates:
        dynamodb.update_table(
            TableName=name,
            AttributeDefinitions=after.create_kwargs["AttributeDefinitions"],
            GlobalSecondaryIndexUpdates=updates,  # type: ignore[arg-type]
        )
        dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    settings: dict[str, Any] = {}
    if before.create_kwargs.get("BillingMode") != after.create_kwargs.get("BillingMode"):
        settings["BillingMode"] = after.create_kwargs["BillingMode"]
    throughput = after.create_kwargs.get("ProvisionedThroughput")
    if throughput and before.create_kwargs.get("ProvisionedThroughput") != throughput:
        settings["ProvisionedThroughput"] = throughput
    if before.create_kwargs.get("StreamSpecification") != after.create_kwargs.get("StreamSpecification"):
        settings["StreamSpecification"] = after.create_kwargs.get("StreamSpecification") or {"StreamEnabled": False}
    if settings:
        dynamodb.update_table(TableName=name, **settings)
    if before.ttl_attribute != after.ttl_attribute:
        if before.ttl_attribute:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": False, "AttributeName": before.ttl_attribute},
            )
        if after.ttl_attribute:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": after.ttl_attribute},
            )
