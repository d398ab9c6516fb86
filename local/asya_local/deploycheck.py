"""``asya deploy``'s check for a retained task table before CloudFormation meets it (docs/deploy.md, "Retained
data").

With ``deployment.retain_data`` (the default) ``destroy`` keeps the table ``asya-{ns}-tasks``; a later deploy of the
same namespace that does not reuse it (``deployment.existing_table: true``) fails inside CloudFormation, minutes in,
with "already exists". :func:`retained_table_problem` finds that case first, with two read-only calls:

1. ``DescribeTable`` of ``asya-{ns}-tasks``: missing -> nothing to say; ``existing_table: true`` -> nothing to say.
2. ``ListTagsOfResource`` of the table: CloudFormation tags what it creates with ``aws:cloudformation:stack-id``.
   No such tag -> the table was made some other way; a tag naming a stack that ``DescribeStacks`` reports as
   ``DELETE_COMPLETE`` (or no longer knows) -> retained by a deleted stack. Either way the deploy would fail: the
   problem names the table, the stack that left it and the fix. A tag naming a live stack is the normal update.

Any other AWS error (no credentials, access denied) skips the check with a note: the CDK CLI reports those itself.
Clients are injected; :func:`check_before_deploy` builds them lazily for the deploy's region.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from asya import naming
from asya.awsclients import LOCAL_BUDGET, aws_client
from asya.manifest import Manifest
from asya_local.exceptions import LocalModeError

__all__ = ["STACK_ID_TAG", "RetainedTableError", "check_before_deploy", "deploy_region", "retained_table_problem"]

STACK_ID_TAG: Final = "aws:cloudformation:stack-id"
_REGION_CONTEXT: Final = "asya:region"


class RetainedTableError(LocalModeError):
    """The deploy would collide with a task table that already exists; the message names the fix."""


def retained_table_problem(manifest: Manifest, *, dynamodb: Any, cloudformation: Any) -> str | None:
    """Why the deploy would fail on an existing ``asya-{ns}-tasks``, or ``None`` when it would not."""
    from botocore.exceptions import ClientError

    if manifest.deployment.existing_table:
        return None
    name = naming.table_name(manifest.namespace)
    try:
        table = dynamodb.describe_table(TableName=name)["Table"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ResourceNotFoundException":
            return None
        raise
    tags = dynamodb.list_tags_of_resource(ResourceArn=table["TableArn"]).get("Tags", [])
    stack_id = next((t["Value"] for t in tags if t["Key"] == STACK_ID_TAG), None)
    fix = (
        "set deployment.existing_table: true in asya.yaml to reuse it (and deployment.existing_bucket: the retained "
        "bucket's name, the old stack's BucketName output), or delete it first (docs/deploy.md, Retained data)"
    )
    if stack_id is None:
        return f"table {name!r} already exists and no CloudFormation stack created it; {fix}"
    if _stack_alive(cloudformation, stack_id):
        return None
    return f"table {name!r} was retained by the deleted stack {stack_id}; CloudFormation cannot create it again: {fix}"


def _stack_alive(cloudformation: Any, stack_id: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        stacks = cloudformation.describe_stacks(StackName=stack_id)["Stacks"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ValidationError":  # "Stack with id ... does not exist"
            return False
        raise
    return any(stack["StackStatus"] != "DELETE_COMPLETE" for stack in stacks)


def deploy_region(context: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The region the deploy goes to: ``-c asya:region=...``, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``."""
    for pair in reversed(context):
        key, _, value = pair.partition("=")
        if key == _REGION_CONTEXT and value:
            return value
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def check_before_deploy(
    manifest: Manifest, *, region: str | None, clients: Mapping[str, Any] | None = None
) -> str | None:
    """Raise :class:`RetainedTableError` when the deploy would meet a retained table; return a note when the check
    could not run (credentials, permissions), else ``None``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if clients is None:
            import boto3

            session = boto3.session.Session(region_name=region)
            clients = {
                "dynamodb": aws_client("dynamodb", LOCAL_BUDGET, session=session),
                "cloudformation": aws_client("cloudformation", LOCAL_BUDGET, session=session),
            }
        problem = retained_table_problem(
            manifest, dynamodb=clients["dynamodb"], cloudformation=clients["cloudformation"]
        )
    except ClientError as exc:
        return f"the retained-table check was skipped ({exc.response['Error']['Code']})"
    except BotoCoreError as exc:
        return f"the retained-table check was skipped ({type(exc).__name__})"
    if problem is not None:
        raise RetainedTableError(f"asya deploy: {problem}")
    return None
