"""The mesh's customer-managed KMS key and what it covers beyond the queues, table and bucket: the log groups.

- :func:`mesh_key`: ``storage.kms_key_arn`` imported by ARN, or with ``storage.create_kms_key`` a key created here
  (yearly rotation, retained with the stack's data). Unset: ``None``, the AWS-owned keys (no KMS charge).
- A created key's policy lets the account's IAM policies grant it (the default key policy) and lets CloudWatch Logs
  of the stack's region use it for this account's log groups only (``kms:EncryptionContext:aws:logs:arn``); a key of
  your own needs the same statement (docs/deploy.md, "Encryption", prints it), else the log groups fail to create.
- :func:`encrypt_log_groups` points each log group at the key (``KmsKeyId``).

The roles get ``kms:Decrypt`` and ``kms:GenerateDataKey`` on the key through their declared ``key.use`` call
(:mod:`asya_deploy.access`, rendered by :mod:`asya_cdk.permissions`).
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Arn, ArnComponents, ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from asya.manifest import StorageConfig

__all__ = ["encrypt_log_groups", "logs_key_statement", "mesh_key"]


def mesh_key(scope: Construct, storage: StorageConfig, *, namespace: str, retain: bool) -> kms.IKey | None:
    """The manifest's key (imported), a key created for the mesh, or ``None``."""
    if storage.kms_key_arn is not None:
        return kms.Key.from_key_arn(scope, "Key", storage.kms_key_arn)
    if not storage.create_kms_key:
        return None
    key = kms.Key(
        scope,
        "Key",
        description=f"asya mesh {namespace}: queues, table, bucket, log groups and backups",
        enable_key_rotation=True,
        # the key outlives the stack with the data it encrypts: deleting it would make retained data unreadable
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
    )
    key.add_to_resource_policy(logs_key_statement(scope))
    return key


def logs_key_statement(scope: Construct) -> iam.PolicyStatement:
    """The key policy statement CloudWatch Logs needs to encrypt this account's log groups in the stack's region."""
    stack = Stack.of(scope)
    return iam.PolicyStatement(
        sid="CloudWatchLogsOfThisAccount",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
        actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
        resources=["*"],  # in a key policy, "*" is the key itself
        conditions={
            "ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": Arn.format(
                    ArnComponents(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    ),
                    stack,
                )
            }
        },
    )


def encrypt_log_groups(groups: Iterable[logs.ILogGroup], key: kms.IKey | None) -> None:
    """Encrypt each of the mesh's log groups with ``key`` (nothing without one)."""
    if key is None:
        return
    for group in groups:
        cfn = group.node.default_child
        assert isinstance(cfn, logs.CfnLogGroup), group.node.path
        # the key's policy is part of the key resource, so the reference alone orders the log group after it
        cfn.kms_key_id = key.key_arn
