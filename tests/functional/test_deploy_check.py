"""``asya deploy``'s retained-table check (issue 26 item 4 leftover; docs/deploy.md, "Retained data"), against moto:
a table a deleted stack retained stops the deploy with the fix; the live stack's own table, a reused table and no
table at all let it through.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya import naming
from asya.manifest import Manifest, parse_manifest
from asya_local.deploycheck import (
    STACK_ID_TAG,
    RetainedTableError,
    check_before_deploy,
    deploy_region,
    retained_table_problem,
)
from tests.conftest import AwsClients

pytestmark = pytest.mark.functional

_TEMPLATE = json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "placeholder"}}}})


def _manifest(**deployment: Any) -> Manifest:
    return parse_manifest({"namespace": "kept", "deployment": deployment})


def _table(aws: AwsClients, tags: list[dict[str, str]]) -> None:
    aws.dynamodb.create_table(
        TableName=naming.table_name("kept"),
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        Tags=tags,
    )


def _stack(aws: AwsClients, *, delete: bool) -> str:
    cloudformation = aws.session.client("cloudformation")
    stack_id: str = cloudformation.create_stack(StackName="asya-kept", TemplateBody=_TEMPLATE)["StackId"]
    if delete:
        cloudformation.delete_stack(StackName=stack_id)
    return stack_id


def _problem(aws: AwsClients, manifest: Manifest) -> str | None:
    return retained_table_problem(manifest, dynamodb=aws.dynamodb, cloudformation=aws.session.client("cloudformation"))


def test_table_retained_by_a_deleted_stack_stops_the_deploy_with_the_fix(aws: AwsClients) -> None:
    stack_id = _stack(aws, delete=True)
    _table(aws, [{"Key": STACK_ID_TAG, "Value": stack_id}])
    problem = _problem(aws, _manifest())
    assert problem is not None
    assert "'asya-kept-tasks'" in problem and stack_id in problem
    assert "deployment.existing_table: true" in problem and "existing_bucket" in problem
    clients = {"dynamodb": aws.dynamodb, "cloudformation": aws.session.client("cloudformation")}
    with pytest.raises(RetainedTableError, match="existing_table: true"):
        check_before_deploy(_manifest(), region="us-east-1", clients=clients)


def test_table_made_outside_cloudformation_stops_the_deploy(aws: AwsClients) -> None:
    _table(aws, [])
    problem = _problem(aws, _manifest())
    assert problem is not None and "no CloudFormation stack created it" in problem


def test_the_live_stacks_own_table_is_an_update(aws: AwsClients) -> None:
    _table(aws, [{"Key": STACK_ID_TAG, "Value": _stack(aws, delete=False)}])
    assert _problem(aws, _manifest()) is None


def test_reused_or_missing_table_passes(aws: AwsClients) -> None:
    assert _problem(aws, _manifest()) is None
    _table(aws, [])
    assert _problem(aws, _manifest(existing_table=True)) is None


def test_denied_check_is_skipped_with_a_note(aws: AwsClients) -> None:
    from botocore.exceptions import ClientError

    class _Denied:
        def describe_table(self, **_: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeTable")

    note = check_before_deploy(_manifest(), region=None, clients={"dynamodb": _Denied(), "cloudformation": None})
    assert note == "the retained-table check was skipped (AccessDeniedException)"


def test_deploy_region_prefers_the_context_over_the_environment() -> None:
    env = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}
    assert deploy_region(["asya:region=eu-central-1"], env) == "eu-central-1"
    assert deploy_region([], env) == "eu-west-1"
    assert deploy_region([], {"AWS_DEFAULT_REGION": "us-west-2"}) == "us-west-2"
    assert deploy_region([], {}) is None
