"""Create a mesh's AWS resources from its manifest with boto3 (the local mode's stand-in for ``cdk deploy``).

Names and settings come from the same modules the CDK app uses (``asya.naming``, ``asya.manifest``,
``asya.tableschema``): per deployed actor a queue ``asya-{ns}-{actor}`` (visibility timeout per P-MAN-4, 14-day
retention, SSE) with its DLQ ``asya-{ns}-{actor}-dlq`` (redrive after ``max_receive_count``), the deadline timer
queue ``asya-{ns}-x-deadline`` (GW-BACK-1, ``asya.naming.DEADLINE``; visibility ``TIMER_VISIBILITY_SECONDS``, the
backstop function's timeout with a margin) with its DLQ (redrive after ``TIMER_MAX_RECEIVE_COUNT``), the task table
and the storage bucket. Idempotent: existing resources are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from asya import naming, tableschema
from asya.manifest import Manifest

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = [
    "DLQ_RETENTION_SECONDS",
    "NAMESPACE_TAG",
    "QUEUE_RETENTION_SECONDS",
    "TIMER_MAX_RECEIVE_COUNT",
    "TIMER_VISIBILITY_SECONDS",
    "MeshResources",
    "provision",
]

#: A source queue keeps messages 7 days (P-ACK-6; the CDK app: asya_cdk.actor.QUEUE_RETENTION).
QUEUE_RETENTION_SECONDS: Final = 604_800
#: Every queue is tagged with its mesh's namespace, so that another namespace whose name extends this one (``demo`` and
#: ``demo-x`` share the prefix ``asya-demo-``) never has its queues taken for this mesh's (``asya_local.orphans``).
NAMESPACE_TAG: Final = "asya-namespace"
#: A DLQ keeps messages longer than its source queue (14 days, the SQS maximum): SQS keeps the original enqueue time.
DLQ_RETENTION_SECONDS: Final = 1_209_600
#: The timer queue's visibility timeout: at least the backstop function's timeout (55 s), as Lambda requires of an
#: SQS event source; a failed timer comes back after it, within GW-BACK-1's 60 s.
TIMER_VISIBILITY_SECONDS: Final = 60
#: Receives of a timer that keeps failing (a malformed body, the store down) before it moves to the DLQ.
TIMER_MAX_RECEIVE_COUNT: Final = 5


@dataclass(frozen=True, slots=True)
class MeshResources:
    """What :func:`provision` created: queue URLs by actor, DLQ URLs by actor (both with the timer queue under
    ``asya.naming.DEADLINE``, which is no actor), the table and the bucket."""

    namespace: str
    queue_urls: dict[str, str] = field(default_factory=dict)
    dlq_urls: dict[str, str] = field(default_factory=dict)
    table: str = ""
    bucket: str = ""


def provision(
    manifest: Manifest,
    *,
    sqs: SQSClient,
    dynamodb: DynamoDBClient,
    s3: S3Client,
    region: str = "us-east-1",
) -> MeshResources:
    """Create every queue, DLQ, the table and the bucket the manifest needs."""
    resources = MeshResources(
        namespace=manifest.namespace,
        table=manifest.table_name,
        bucket=naming.bucket_name(manifest.namespace),
    )
    queues = [(actor.name, actor.visibility_timeout, actor.max_receive_count) for actor in manifest.deployed_actors()]
    queues.append((naming.DEADLINE, TIMER_VISIBILITY_SECONDS, TIMER_MAX_RECEIVE_COUNT))
    for name, visibility, max_receive_count in queues:
        queue_url, dlq_url = _create_queue_pair(
            sqs, manifest, name, visibility_timeout=visibility, max_receive_count=max_receive_count
        )
        resources.queue_urls[name] = queue_url
        resources.dlq_urls[name] = dlq_url
    _create_table(dynamodb, resources.table)
    _create_bucket(s3, resources.bucket, region)
    return resources


def _create_queue_pair(
    sqs: SQSClient, manifest: Manifest, name: str, *, visibility_timeout: int, max_receive_count: int
) -> tuple[str, str]:
    tags = {NAMESPACE_TAG: manifest.namespace}
    dlq_url = sqs.create_queue(
        QueueName=manifest.dlq_name(name),
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
        tags=tags,
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=manifest.queue_name(name),
        Attributes={
            "VisibilityTimeout": str(visibility_timeout),
            "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
            "SqsManagedSseEnabled": "true",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}),
        },
        tags=tags,
    )["QueueUrl"]
    return queue_url, dlq_url


def _create_table(dynamodb: DynamoDBClient, table: str) -> None:
    try:
        dynamodb.create_table(**tableschema.boto3_create_table_kwargs(table))
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    else:
        dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        dynamodb.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": tableschema.TTL_ATTRIBUTE},
        )


def _create_bucket(s3: S3Client, bucket: str, region: str) -> None:
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**kwargs)
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": f"expire-{prefix.rstrip('/')}",
                    "Status": "Enabled",
                    "Filter": {"Prefix": prefix},
                    "Expiration": {"Days": tableschema.PAYLOADS_RETENTION_DAYS},
                }
                for prefix in (tableschema.PAYLOADS_PREFIX, tableschema.FANIN_PREFIX)
            ]
        },
    )
