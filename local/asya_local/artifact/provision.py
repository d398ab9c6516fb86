"""Create the resources of a :class:`~asya_local.artifact.model.MeshSpec` in moto, as CloudFormation would.

Queues get every attribute the template sets (visibility, retention, delay, message size, SSE, redrive to their
DLQ: DLQs are created first, redrive policies set once every queue exists), the table its keys, indexes, billing
mode and TTL, the bucket its encryption, public access block and lifecycle rules, each secret a random value (as a
generated secret string). The mesh's own clients (the deployer's, not a function's) create them. The pieces
(:func:`create_table`, :func:`create_bucket`, :func:`configure_bucket`, :func:`secrets_client`) serve an update of a
running mesh too (:mod:`~asya_local.artifact.update`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asya.awsclients import LOCAL_BUDGET, aws_client
from asya_local.artifact.model import BucketSpec, MeshSpec, TableSpec

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = ["configure_bucket", "create_bucket", "create_table", "provision_spec", "secrets_client"]


def provision_spec(spec: MeshSpec, *, sqs: SQSClient, dynamodb: DynamoDBClient, s3: S3Client, region: str) -> None:
    urls: dict[str, str] = {}
    for queue in spec.queues.values():
        attributes = {k: v for k, v in queue.attributes.items() if k != "RedrivePolicy"}
        urls[queue.arn] = sqs.create_queue(QueueName=queue.name, Attributes=attributes)["QueueUrl"]  # type: ignore[arg-type]
    for queue in spec.queues.values():
        if "RedrivePolicy" in queue.attributes:
            sqs.set_queue_attributes(
                QueueUrl=urls[queue.arn], Attributes={"RedrivePolicy": queue.attributes["RedrivePolicy"]}
            )
    for table in spec.tables:
        create_table(dynamodb, table)
    for bucket in spec.buckets:
        create_bucket(s3, bucket, region)
    if spec.secrets:
        import secrets

        client = secrets_client(sqs, region)
        for name in spec.secrets:
            client.create_secret(Name=name, SecretString=secrets.token_urlsafe(30))


def secrets_client(sqs: SQSClient, region: str) -> Any:
    """The deployer's Secrets Manager client, as the others: the sqs client's endpoint, fake credentials."""
    import boto3

    from asya_local.moto_server import FAKE_CREDENTIALS

    return aws_client(
        "secretsmanager",
        LOCAL_BUDGET,
        session=boto3.Session(),
        region_name=region,
        endpoint_url=sqs.meta.endpoint_url,
        aws_access_key_id=FAKE_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=FAKE_CREDENTIALS["aws_secret_access_key"],
    )


def create_table(dynamodb: DynamoDBClient, table: TableSpec) -> None:
    dynamodb.create_table(**table.create_kwargs)
    dynamodb.get_waiter("table_exists").wait(TableName=table.name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    if table.ttl_attribute:
        dynamodb.update_time_to_live(
            TableName=table.name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
        )


def create_bucket(s3: S3Client, bucket: BucketSpec, region: str) -> None:
    kwargs: dict[str, Any] = {"Bucket": bucket.name}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    s3.create_bucket(**kwargs)
    configure_bucket(s3, bucket)


def configure_bucket(s3: S3Client, bucket: BucketSpec, *, previous: BucketSpec | None = None) -> None:
    """Set the bucket's encryption, public access block and lifecycle rules; with ``previous`` (an update), a
    setting the new template drops is removed."""
    props = bucket.properties
    before = previous.properties if previous is not None else {}
    encryption = props.get("BucketEncryption")
    if encryption:
        s3.put_bucket_encryption(
            Bucket=bucket.name,
            ServerSideEncryptionConfiguration={
                "Rules": [
                    {"ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"]}
                    for rule in encryption["ServerSideEncryptionConfiguration"]
                ]
            },
        )
    elif before.get("BucketEncryption"):
        s3.delete_bucket_encryption(Bucket=bucket.name)
    if props.get("PublicAccessBlockConfiguration"):
        s3.put_public_access_block(
            Bucket=bucket.name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"]
        )
    elif before.get("PublicAccessBlockConfiguration"):
        s3.delete_public_access_block(Bucket=bucket.name)
    rules = (props.get("LifecycleConfiguration") or {}).get("Rules") or []
    if rules:
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket.name,
            LifecycleConfiguration={"Rules": [_lifecycle_rule(rule) for rule in rules]},  # type: ignore[misc]
        )
    elif (before.get("LifecycleConfiguration") or {}).get("Rules"):
        s3.delete_bucket_lifecycle(Bucket=bucket.name)


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {
        "ID": rule.get("Id", ""),
        "Status": rule.get("Status", "Enabled"),
        "Filter": {"Prefix": rule.get("Prefix", "")},
    }
    if "ExpirationInDays" in rule:
        converted["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        converted["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])
        }
    return converted
