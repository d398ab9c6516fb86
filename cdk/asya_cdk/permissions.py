"""Each mesh function's IAM policy, derived from the calls its code declares (``asya_deploy.access``), never
written here.

:func:`grant_access` renders a role of :data:`asya_deploy.access.ROLES` as policy statements on the function's role:

- :class:`~asya_deploy.access.Table` -> the table ARN; :class:`~asya_deploy.access.Index` -> ``{table}/index/{name}``;
- :class:`~asya_deploy.access.Objects` -> ``{bucket}/{pattern}`` (``paused/*.json``, ``tasks/*/result.json``, ...);
- :class:`~asya_deploy.access.Listing` -> one ``s3:ListBucket`` on the bucket, conditioned ``StringLike s3:prefix``
  on the declared prefixes (every listing call of the role in one statement);
- :class:`~asya_deploy.access.Queues` -> ``arn:...:sqs:{region}:{account}:asya-{ns}-{pattern}``;
- :class:`~asya_deploy.access.Unscoped` -> ``*``; :class:`~asya_deploy.access.OwnQueue` is granted by the event
  source mapping.

Every wildcard a statement holds is acknowledged to cdk-nag (``AwsSolutions-IAM5``) on the function, with the
declaring call's ``why`` as the reason. :class:`~asya_deploy.access.MeshKey` -> the customer-managed key's ARN when the
mesh has one (``storage.kms_key_arn`` / ``create_kms_key``), else the call is not granted at all.

Missing keys, 403 or 404: S3 answers a ``GetObject``/``HeadObject`` of a missing key with 404 only when the caller has
``s3:ListBucket`` on the bucket, and that request carries no ``s3:prefix``, so a prefix-conditioned ``ListBucket``
never applies to it and the answer is 403. The choice here is least privilege without relying on 404: no role gets an
unconditioned ``ListBucket`` (it would let every function list every task id and checkpoint of the mesh). The code
that must tell "missing" from "denied" (x-resume's paused file, the gateway's resume check, every payload reference)
confirms a 403 with a ``ListObjectsV2`` of the key itself under the prefix-conditioned grant (``asya.missingkey``);
x-pause never reads its file and stores it with a conditional write (``If-None-Match: *``). docs/deploy.md states the
same rule and prints the matrix that tests/infra/test_permissions.py checks against :data:`asya_deploy.access.ROLES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Arn, ArnComponents, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from asya import naming
from asya_cdk.nag import acknowledge_wildcard_resources
from asya_deploy import access
from asya_deploy.access import DEADLINE_INDEXES, ROLES, Call, Role, role_of

__all__ = [
    "DEADLINE_INDEXES",
    "ROLES",
    "Role",
    "grant_access",
    "matrix_markdown",
    "mesh_queue_arn_pattern",
    "queue_arn_pattern",
    "role_of",
]

_LIST_BUCKET: Final = "s3:ListBucket"


def queue_arn_pattern(scope: IConstruct, namespace: str, pattern: str) -> str:
    """``arn:{partition}:sqs:{region}:{account}:asya-{ns}-{pattern}`` (P-NAME-4)."""
    return Arn.format(
        ArnComponents(service="sqs", resource=naming.queue_name(namespace, pattern)),
        Stack.of(scope),
    )


def mesh_queue_arn_pattern(scope: IConstruct, namespace: str) -> str:
    """``arn:{partition}:sqs:{region}:{account}:asya-{ns}-*``: every queue of the mesh (P-NAME-4)."""
    return queue_arn_pattern(scope, namespace, "*")


def grant_access(
    grantee: lambda_.Function,
    role: Role,
    *,
    namespace: str,
    table: dynamodb.ITable,
    bucket: s3.IBucket,
    key: kms.IKey | None,
) -> None:
    """Add ``role``'s declared calls to ``grantee``'s policy, one statement per call (every listing in one), and
    acknowledge the cdk-nag finding of each wildcard with the declaring call's reason."""
    reasons: dict[str, list[str]] = {}
    listing: list[tuple[Call, tuple[str, ...]]] = []
    for call in role.calls:
        resource = call.resource
        if isinstance(resource, access.OwnQueue):
            continue
        if isinstance(resource, access.Listing):
            listing.append((call, resource.prefixes))
            continue
        if isinstance(resource, access.MeshKey):
            if key is not None:
                iam.Grant.add_to_principal(grantee=grantee, actions=list(call.actions), resource_arns=[key.key_arn])
            continue
        arns = _arns(grantee, resource, namespace=namespace, table=table, bucket=bucket)
        iam.Grant.add_to_principal(grantee=grantee, actions=list(call.actions), resource_arns=arns)
        for arn in arns:
            reasons.setdefault(arn, []).append(f"{role.name} {call.name}: {call.why}")
    if listing:
        prefixes = [f"{prefix}*" for _, found in listing for prefix in found]
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[_LIST_BUCKET],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": list(dict.fromkeys(prefixes))}},
            )
        )
    _acknowledge(grantee, reasons)


def _arns(
    scope: IConstruct, resource: access.Resource, *, namespace: str, table: dynamodb.ITable, bucket: s3.IBucket
) -> list[str]:
    if isinstance(resource, access.Table):
        return [table.table_arn]
    if isinstance(resource, access.Index):
        return [f"{table.table_arn}/index/{name}" for name in resource.names]
    if isinstance(resource, access.Objects):
        return [bucket.arn_for_objects(resource.pattern)]
    if isinstance(resource, access.Queues):
        return [queue_arn_pattern(scope, namespace, resource.pattern)]
    if isinstance(resource, access.Unscoped):
        return ["*"]
    raise TypeError(f"resource {resource!r} has no ARN of its own")


def _acknowledge(grantee: IConstruct, reasons: Mapping[str, list[str]]) -> None:
    for arn, why in reasons.items():
        acknowledge_wildcard_resources(grantee, [arn], "; ".join(why) + " (docs/deploy.md, least privilege).")


def matrix_markdown() -> str:
    """The declared calls of every role as the Markdown table docs/deploy.md prints (the test checks that copy)."""
    lines = ["| Role | Call | Actions | Resource |", "|---|---|---|---|"]
    for role in ROLES.values():
        for call in role.calls:
            actions = ", ".join(call.actions)
            lines.append(f"| {role.name} | `{call.name}` | {actions} | {_describe(call.resource)} |")
    return "\n".join(lines) + "\n"


def _describe(resource: access.Resource) -> str:
    if isinstance(resource, access.Table):
        return "the table"
    if isinstance(resource, access.Index):
        return "index " + ", ".join(f"`{name}`" for name in resource.names)
    if isinstance(resource, access.Objects):
        return f"objects `{resource.pattern}`"
    if isinstance(resource, access.Listing):
        return "the bucket, `s3:prefix` like " + ", ".join(f"`{prefix}*`" for prefix in resource.prefixes)
    if isinstance(resource, access.Queues):
        return f"queues `asya-{{ns}}-{resource.pattern}`"
    if isinstance(resource, access.OwnQueue):
        return "its own queue (granted by the event source mapping)"
    if isinstance(resource, access.MeshKey):
        return "the mesh's customer-managed key (only with `storage.kms_key_arn` or `create_kms_key`)"
    return "`*` (no resource-level permissions)"
