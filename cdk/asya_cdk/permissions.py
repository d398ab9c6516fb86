"""The least-privilege matrix of a mesh: what each kind of function may do on the table, the bucket and the queues.

One entry per role (docs/deploy.md prints the same matrix; tests/infra/test_permissions.py asserts it statement by
statement on the synthesized template):

- actor: table GetItem, PutItem, UpdateItem; no index; S3 get and put under ``payloads/`` and ``fanin/``; consumes
  its own queue, sends to ``asya-{ns}-*``.
- x-sink: table as an actor; S3 get under ``payloads/``, put under ``succeeded/`` and ``failed/`` (checkpoints);
  consumes its own queue, sends to ``asya-{ns}-*`` (sink hooks, x-sump).
- x-sump: table as an actor; S3 get under ``payloads/``, put under ``failed/`` and ``unparsed/``; consumes its own
  queue, sends to ``asya-{ns}-*``.
- gateway: table GetItem, PutItem, UpdateItem, DeleteItem, Query, BatchGetItem, BatchWriteItem; Query on the
  listing indexes (every index but the deadline ones); S3 get and put (and presigned URLs) under ``tasks/`` and
  ``payloads/``, delete under ``tasks/``; sends to ``asya-{ns}-*`` (creates, the deadline timers) and reads queue
  attributes (mq-diagnostic).
- backstop: table GetItem, UpdateItem, Query; Query on the deadline indexes; no S3; consumes
  ``asya-{ns}-x-deadline``.

No role may Scan, and only the gateway may DeleteItem (undoing a create whose body write failed, GW-CREATE-8). The
queue wildcard ``asya-{ns}-*`` is the mesh's own naming rule (P-NAME-4): an actor sends to any actor of its mesh by
name, and a per-queue list would not fit IAM's 10 KB role-policy limit for a mesh of 200 actors. ``ListBucket`` is
granted only with an ``s3:prefix`` condition on the prefixes a role reads, so a missing key answers 404, not 403.

With a customer-managed KMS key (``storage.kms_key_arn``), every role gets ``kms:Decrypt``, ``kms:Encrypt``,
``kms:GenerateDataKey*`` and ``kms:ReEncrypt*`` on that key only (SQS and DynamoDB encrypt with it on their behalf).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aws_cdk import Arn, ArnComponents, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from asya import naming, tableschema
from asya_cdk.nag import acknowledge, acknowledge_wildcard_resources

__all__ = [
    "ACTOR",
    "BACKSTOP",
    "DEADLINE_INDEXES",
    "GATEWAY",
    "ROLES",
    "SINK",
    "SUMP",
    "Access",
    "grant_access",
    "mesh_queue_arn_pattern",
]

#: The index only the backstop reads (GW-BACK-1).
DEADLINE_INDEXES: Final = frozenset({"long_deadlines"})
_CHECKPOINT_SUCCEEDED: Final = "succeeded/"
_CHECKPOINT_FAILED: Final = "failed/"
_UNPARSED: Final = "unparsed/"


@dataclass(frozen=True, slots=True)
class Access:
    """What one role may do. ``indexes``: ``"listing"`` (every index but the deadline ones), ``"deadline"`` or
    ``None``; prefixes are bucket key prefixes ending in ``/``."""

    role: str
    table_actions: tuple[str, ...]
    indexes: str | None = None
    s3_read: tuple[str, ...] = ()
    s3_write: tuple[str, ...] = ()
    s3_delete: tuple[str, ...] = ()
    send_to_mesh: bool = True

    def index_names(self) -> tuple[str, ...]:
        if self.indexes is None:
            return ()
        deadline = self.indexes == "deadline"
        return tuple(g.name for g in tableschema.GSIS if (g.name in DEADLINE_INDEXES) == deadline)


_ITEM_RW: Final = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
_PAYLOADS: Final = tableschema.PAYLOADS_PREFIX

ACTOR: Final = Access(
    "actor",
    (*_ITEM_RW, "dynamodb:BatchGetItem"),  # BatchGetItem: the pre-flight read of each batch (P-STAT-10)
    s3_read=(_PAYLOADS, tableschema.FANIN_PREFIX),
    s3_write=(_PAYLOADS, tableschema.FANIN_PREFIX),
)
SINK: Final = Access("x-sink", _ITEM_RW, s3_read=(_PAYLOADS,), s3_write=(_CHECKPOINT_SUCCEEDED, _CHECKPOINT_FAILED))
SUMP: Final = Access("x-sump", _ITEM_RW, s3_read=(_PAYLOADS,), s3_write=(_CHECKPOINT_FAILED, _UNPARSED))
GATEWAY: Final = Access(
    "gateway",
    (
        *_ITEM_RW,
        "dynamodb:DeleteItem",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:BatchWriteItem",
    ),
    indexes="listing",
    s3_read=(tableschema.TASKS_PREFIX, _PAYLOADS),
    s3_write=(tableschema.TASKS_PREFIX, _PAYLOADS),
    s3_delete=(tableschema.TASKS_PREFIX,),
)
BACKSTOP: Final = Access(
    "backstop",
    ("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"),
    indexes="deadline",
    send_to_mesh=False,
)
#: Every role, by name.
ROLES: Final = {access.role: access for access in (ACTOR, SINK, SUMP, GATEWAY, BACKSTOP)}


def mesh_queue_arn_pattern(scope: IConstruct, namespace: str) -> str:
    """``arn:{partition}:sqs:{region}:{account}:asya-{ns}-*``: every queue of the mesh (P-NAME-4)."""
    return Arn.format(
        ArnComponents(service="sqs", resource=naming.queue_name(namespace, "*")),
        Stack.of(scope),
    )


def grant_access(
    grantee: lambda_.Function,
    access: Access,
    *,
    namespace: str,
    table: dynamodb.ITable,
    bucket: s3.IBucket,
    key: kms.IKey | None,
) -> None:
    """Add ``access``'s statements to ``grantee``'s policy, one statement per kind of access, and acknowledge the
    cdk-nag findings of exactly the wildcards the matrix allows (on ``grantee``'s construct)."""
    scope = table
    table_arn = table.table_arn
    iam.Grant.add_to_principal(grantee=grantee, actions=list(access.table_actions), resource_arns=[table_arn])
    indexes = access.index_names()
    if indexes:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["dynamodb:Query"],
            resource_arns=[f"{table_arn}/index/{name}" for name in indexes],
        )
    _grant_objects(grantee, bucket, ["s3:GetObject"], access.s3_read)
    _grant_objects(grantee, bucket, ["s3:PutObject"], access.s3_write)
    _grant_objects(grantee, bucket, ["s3:DeleteObject"], access.s3_delete)
    if access.s3_read:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in access.s3_read]}},
            )
        )
    if access.send_to_mesh:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
            resource_arns=[mesh_queue_arn_pattern(scope, namespace)],
        )
    if key is not None:
        key.grant_encrypt_decrypt(grantee)
    _acknowledge(grantee, access, namespace=namespace, bucket=bucket, key=key)


def _acknowledge(
    grantee: IConstruct, access: Access, *, namespace: str, bucket: s3.IBucket, key: kms.IKey | None
) -> None:
    prefixes = sorted({*access.s3_read, *access.s3_write, *access.s3_delete})
    acknowledge_wildcard_resources(
        grantee,
        [bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
        f"Object keys are per task and envelope (GW-DATA-7): the {access.role} role gets only the prefixes it "
        "uses, with object-level actions only (docs/deploy.md, least privilege).",
    )
    if access.send_to_mesh:
        acknowledge_wildcard_resources(
            grantee,
            [mesh_queue_arn_pattern(grantee, namespace)],
            f"asya-{namespace}-* is the mesh's own queue naming rule (P-NAME-4): an actor sends to any actor of its "
            "mesh by name, and one ARN per queue would exceed IAM's role-policy size for large meshes.",
        )
    if key is not None:
        for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
            acknowledge(
                grantee,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CDK's grantEncryptDecrypt on the mesh's own customer-managed key only; SQS and DynamoDB call "
                "these on the role's behalf.",
            )


def _grant_objects(
    grantee: iam.IGrantable, bucket: s3.IBucket, actions: Sequence[str], prefixes: Sequence[str]
) -> None:
    if prefixes:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions),
            resource_arns=[bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
        )
