"""``AsyaMesh``'s hooks and grants (issue 26 item 10) and its retained data (item 4), on one mesh synthesized once:

- ``queue_props`` / ``dead_letter_queue_props`` reach the deadline backstop's timer queue and its DLQ, as they reach
  every actor's;
- a DLQ that would keep messages no longer than its source queue is refused, the error naming both values;
- ``grant_create_tasks``, ``grant_read_tasks`` and ``grant_send`` return ``iam.Grant`` and put exactly their
  statements on the grantee (``execute-api:Invoke`` on the task routes; ``sqs:SendMessage`` on one queue); the
  gateway grants are refused outside ``gateway.auth.mode: iam``;
- ``deployment.existing_table`` / ``existing_bucket`` reuse what a deleted stack retained: nothing is created, and the
  grants name the retained table and bucket;
- the data is retained (and the table protected from deletion) by default; ``asya destroy --delete-data``'s context
  ``asya:deleteData=true`` synthesizes both to be deleted with the stack, the bucket emptied first, cdk-nag clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs

from asya_cdk import AsyaMesh, DeploymentError
from asya_cdk.testing import SynthesizedMesh, synthesize_mesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
BUCKET = "asya-shop-retained-data"
MANIFEST: dict[str, Any] = {
    "namespace": "shop",
    "actors": {"pay": {"handler": "text.normalize", "code": str(REPO / "functions")}},
    "flows": {"order": {"route": ["pay"]}},
}
FOUR_DAYS = 4 * 86400
TEN_DAYS = 10 * 86400


def _write(directory: Path, **extra: Any) -> Path:
    path = directory / "asya.yaml"
    path.write_text(yaml.safe_dump({**MANIFEST, **extra}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[AsyaMesh, dict[str, Any], list[iam.Grant]]:
    directory = tmp_path_factory.mktemp("hooks")
    manifest = _write(directory, deployment={"existing_table": True, "existing_bucket": BUCKET})
    app = cdk.App(outdir=str(directory / "out"), analytics_reporting=False)
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(region="eu-west-1"))
    mesh = AsyaMesh(
        stack,
        "Default",
        manifest=manifest,
        queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(4)),
        dead_letter_queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(10)),
    )
    client = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    grants = [mesh.grant_create_tasks(client), mesh.grant_read_tasks(client), mesh.grant_send("pay", client)]
    template: dict[str, Any] = app.synth().get_stack_artifact(stack.artifact_id).template
    return mesh, template, grants


def _of_type(template: dict[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {key: r for key, r in template["Resources"].items() if r["Type"] == cfn_type}


def _queue(template: dict[str, Any], name: str) -> dict[str, Any]:
    (queue,) = [
        q["Properties"] for q in _of_type(template, "AWS::SQS::Queue").values() if q["Properties"]["QueueName"] == name
    ]
    return queue


def test_queue_hooks_reach_the_timer_queue_and_its_dlq(shop: tuple[AsyaMesh, dict[str, Any], list[iam.Grant]]) -> None:
    _, template, _ = shop
    assert _queue(template, "asya-shop-x-deadline")["MessageRetentionPeriod"] == FOUR_DAYS
    assert _queue(template, "asya-shop-x-deadline-dlq")["MessageRetentionPeriod"] == TEN_DAYS
    assert _queue(template, "asya-shop-pay")["MessageRetentionPeriod"] == FOUR_DAYS
    assert _queue(template, "asya-shop-pay-dlq")["MessageRetentionPeriod"] == TEN_DAYS
    # the fields the mesh owns stay the mesh's on the timer queue too
    timer = _queue(template, "asya-shop-x-deadline")
    assert timer["VisibilityTimeout"] == 55 + 60 and timer["RedrivePolicy"]["maxReceiveCount"] == 5


def _client_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    (policy,) = [
        p["Properties"]
        for p in _of_type(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"]
        == [{"Ref": next(k for k in _of_type(template, "AWS::IAM::Role") if k.startswith("Client"))}]
    ]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


def test_grants_return_grants_with_exactly_their_statements(
    shop: tuple[AsyaMesh, dict[str, Any], list[iam.Grant]],
) -> None:
    _, template, grants = shop
    assert all(isinstance(grant, iam.Grant) and grant.success for grant in grants)
    statements = _client_statements(template)
    invoke = [s for s in statements if s["Action"] == "execute-api:Invoke"]
    rendered = json.dumps(invoke)
    for route in ("/POST/api/v1/mesh/", "/GET/api/v1/mesh/*", '/GET/api/v1/mesh"', '/POST/api/v1/mesh"'):
        assert route in rendered
    assert "DELETE" not in rendered and "/events" not in rendered.replace("/GET/api/v1/mesh/*", "")
    (send,) = [s for s in statements if "sqs:SendMessage" in s["Action"]]
    (pay_queue,) = [
        k for k, q in _of_type(template, "AWS::SQS::Queue").items() if q["Properties"]["QueueName"] == "asya-shop-pay"
    ]
    assert send["Resource"] == {"Fn::GetAtt": [pay_queue, "Arn"]}
    assert sum(len(s["Resource"]) for s in invoke) == 4
    assert len(statements) == len(invoke) + 1


def test_existing_table_and_bucket_are_reused_not_created(
    shop: tuple[AsyaMesh, dict[str, Any], list[iam.Grant]],
) -> None:
    """Issue 26 item 4: a redeploy onto the retained table and bucket creates neither; the grants name them."""
    mesh, template, _ = shop
    assert mesh.dynamo_table is None and mesh.s3_bucket is None
    assert _of_type(template, "AWS::DynamoDB::Table") == {} and _of_type(template, "AWS::S3::Bucket") == {}
    policies = json.dumps(_of_type(template, "AWS::IAM::Policy"))
    assert ":table/asya-shop-tasks" in policies and f":s3:::{BUCKET}/payloads/*" in policies


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="eu-west-1"))


def test_a_dlq_keeping_messages_no_longer_than_its_source_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError) as info:
        AsyaMesh(
            _stack(),
            "Default",
            manifest=_write(tmp_path),
            queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(10)),
            dead_letter_queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(10)),
        )
    assert (
        "dead_letter_queue_props.retention_period: 10 days is not longer than the source queue's retention_period "
        "10 days" in str(info.value)
    )
    with pytest.raises(DeploymentError, match=r"retention_period: 14 days is not longer than .* 14 days"):
        AsyaMesh(
            _stack(),
            "Default",
            manifest=_write(tmp_path),
            queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(14)),
        )


def test_gateway_grants_need_iam_auth_and_grant_send_a_deployed_actor(tmp_path: Path) -> None:
    stack = _stack()
    manifest = _write(tmp_path, gateway={"auth": {"mode": "api_key", "api_key_secret": "asya/keys"}})
    mesh = AsyaMesh(stack, "Default", manifest=manifest)
    role = iam.Role(stack, "Client", assumed_by=iam.AccountRootPrincipal())
    with pytest.raises(DeploymentError, match=r"grant_create_tasks: gateway.auth.mode is 'api_key'"):
        mesh.grant_create_tasks(role)
    with pytest.raises(DeploymentError, match=r"grant_read_tasks: gateway.auth.mode is 'api_key'"):
        mesh.grant_read_tasks(role)
    with pytest.raises(
        DeploymentError, match=r"grant_send: actor 'ship' is not deployed .*\['pay', 'x-sink', 'x-sump'\]"
    ):
        mesh.grant_send("ship", role)
    assert mesh.grant_send("x-sink", role).success


def test_existing_table_twice_is_refused(tmp_path: Path) -> None:
    stack = _stack()
    table = cdk.aws_dynamodb.Table.from_table_name(stack, "T", "asya-shop-tasks")
    with pytest.raises(DeploymentError, match=r"deployment.existing_table, existing_table_obj: give one or the other"):
        AsyaMesh(
            stack, "Default", manifest=_write(tmp_path, deployment={"existing_table": True}), existing_table_obj=table
        )


def test_retained_data_is_protected_by_default(example_synth: SynthesizedMesh) -> None:
    ((_, table),) = example_synth.of_type("AWS::DynamoDB::Table").items()
    assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    ((_, bucket),) = example_synth.of_type("AWS::S3::Bucket").items()
    assert bucket["DeletionPolicy"] == "Retain"
    assert example_synth.of_type("Custom::S3AutoDeleteObjects") == {}


def test_delete_data_synthesizes_everything_deletable(tmp_path: Path) -> None:
    """The template ``asya destroy --delete-data`` deploys before it destroys (context ``asya:deleteData``)."""
    synth = synthesize_mesh(
        _write(tmp_path), repo_root=REPO, outdir=tmp_path / "out", context={"asya:deleteData": "true"}
    )
    ((_, table),) = synth.of_type("AWS::DynamoDB::Table").items()
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False
    ((bucket_id, bucket),) = synth.of_type("AWS::S3::Bucket").items()
    assert bucket["DeletionPolicy"] == "Delete"
    ((_, auto_delete),) = synth.of_type("Custom::S3AutoDeleteObjects").items()
    assert auto_delete["Properties"]["BucketName"] == {"Ref": bucket_id}
    report = synth.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []
