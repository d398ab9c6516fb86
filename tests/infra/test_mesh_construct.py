"""``AsyaMesh`` inside someone else's app (issue 19 item 1): the README's example run as written, a mesh with every
opt-in (customer-managed KMS key, SNS alarm topic, log retention, no API Gateway account role) synthesized once with
cdk-nag, and the construct's refusals, each collected into one error before anything is created.

Spec: GATEWAY GW-DATA-7 (S3 keeps SSE-S3), GW-CREATE-7; PROTOCOL P-MAN-1 (errors name the field and the value).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from asya_cdk import AsyaMesh, DeploymentError, EdgeProps, MethodThrottle

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
KEY_ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
TOPIC_ARN = "arn:aws:sns:eu-west-1:111122223333:asya-alerts"
WAF_ARN = "arn:aws:wafv2:eu-west-1:111122223333:regional/webacl/shop/0123abcd-4567-89ab-cdef-0123456789ab"
#: The shop mesh's manifest edge settings, which its ``edge`` prop partly overrides (issue 26, edge props).
MANIFEST_EDGE = {"throttle": {"rate_limit": 10, "burst_limit": 20, "methods": {"/api/v1/mesh/POST": {"rate_limit": 1}}}}

MANIFEST: dict[str, Any] = {
    "namespace": "shop",
    "actors": {"pay": {"handler": "text.normalize", "code": str(REPO / "functions")}},
    "flows": {"order": {"route": ["pay"]}},
    "storage": {"kms_key_arn": KEY_ARN},
    "observability": {"alarm_topic_arn": TOPIC_ARN, "log_retention_days": 90},
}


def _readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- readme-example: own-app .*?-->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "README.md lost its own-app example"
    return match.group(1)


def test_readme_example_runs_in_a_fresh_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's 10 lines, verbatim but for the output directory, synthesize a template with the mesh in it."""
    code = _readme_example()
    assert len(code.strip().splitlines()) <= 10
    assert "cdk.App()" in code
    monkeypatch.chdir(REPO)  # the example names asya.yaml relative to the working directory
    exec(compile(code.replace("cdk.App()", f"cdk.App(outdir={str(tmp_path)!r})"), "README.md", "exec"), {})
    template = json.loads((tmp_path / "Orders.template.json").read_text(encoding="utf-8"))
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    analyze = [f for f in functions if f["Properties"]["Environment"]["Variables"].get("ASYA_ACTOR") == "analyze"]
    assert analyze[0]["Properties"]["Environment"]["Variables"]["MODEL"] == "small"
    assert "Api" in template["Outputs"]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[AsyaMesh, dict[str, Any], Path]:
    directory = tmp_path_factory.mktemp("own-app")
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump({**MANIFEST, "gateway": {"edge": MANIFEST_EDGE}}), encoding="utf-8")
    app = cdk.App(outdir=str(directory / "out"), analytics_reporting=False)
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(region="eu-west-1"))
    mesh = AsyaMesh(
        stack,
        "Default",
        manifest=manifest,
        api_gateway_props=apigw.RestApiProps(cloud_watch_role=False),
        queue_props=sqs.QueueProps(delivery_delay=cdk.Duration.seconds(1)),
        lambda_function_props=lambda_.FunctionOptions(description="shop actor"),
        edge=EdgeProps(
            rate_limit=50,
            waf_web_acl_arn=WAF_ARN,
            method_throttles={"/api/v1/mesh/{task_id}/GET": MethodThrottle(rate_limit=5, burst_limit=5)},
        ),
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_artifact(stack.artifact_id).template
    return mesh, template, directory / "out"


def _of_type(template: dict[str, Any], cfn_type: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == cfn_type]


def test_resources_are_exposed_as_attributes(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    mesh, _, _ = shop
    assert set(mesh.actors) == {"pay", "x-sink", "x-sump"}
    pay = mesh.actors["pay"]
    assert (pay.queue.node.id, pay.dlq.node.id, pay.function.node.id) == ("Queue", "Dlq", "Function")
    assert mesh.dynamo_table is not None and mesh.dynamo_table_interface is mesh.dynamo_table
    assert mesh.s3_bucket is not None and mesh.s3_bucket_interface is mesh.s3_bucket
    assert mesh.api_gateway is mesh.gateway.api
    assert mesh.api_gateway_cloud_watch_role is None  # api_gateway_props.cloud_watch_role=False
    assert mesh.encryption_key is not None
    assert mesh.observability.alarm_topic is not None
    assert mesh.actor_stacks == ()


def test_cdk_nag_passes_with_every_opt_in(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    _, _, outdir = shop
    report = json.loads((outdir / "validation-report.json").read_text(encoding="utf-8"))
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []


def test_customer_managed_key_encrypts_table_and_queues_and_reaches_every_role(
    shop: tuple[AsyaMesh, dict[str, Any], Path],
) -> None:
    """Issue 19 item 6: the manifest's key on the table and every queue, and in every function's grants (its declared
    ``key.use``); issue 26 item 8: on the bucket and the log groups too."""
    _, template, _ = shop
    (table,) = _of_type(template, "AWS::DynamoDB::Table")
    assert table["SSESpecification"] == {"KMSMasterKeyId": KEY_ARN, "SSEEnabled": True, "SSEType": "KMS"}
    queues = _of_type(template, "AWS::SQS::Queue")
    assert len(queues) == 8  # three actors and the timer queue, each with its DLQ
    assert all(q["KmsMasterKeyId"] == KEY_ARN and "SqsManagedSseEnabled" not in q for q in queues)
    # issue 26 item 8: the bucket (with an S3 bucket key) and every log group use it too
    (bucket,) = _of_type(template, "AWS::S3::Bucket")
    rules = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rules == [
        {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {"KMSMasterKeyID": KEY_ARN, "SSEAlgorithm": "aws:kms"},
        }
    ]
    assert {group.get("KmsKeyId") for group in _of_type(template, "AWS::Logs::LogGroup")} == {KEY_ARN}
    roles_with_key = set()
    for policy in _of_type(template, "AWS::IAM::Policy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            if "kms:Decrypt" in statement["Action"]:
                assert statement["Resource"] == KEY_ARN
                roles_with_key.update(r["Ref"] for r in policy["Roles"])
    function_roles = {f["Role"]["Fn::GetAtt"][0] for f in _of_type(template, "AWS::Lambda::Function")}
    assert function_roles and function_roles <= roles_with_key


def test_reporter_secret_uses_the_given_key(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    """GW-EVT-6 (R3): the reporter keys' secret is encrypted with the manifest's key (``storage.kms_key_arn``)."""
    _, template, _ = shop
    (secret,) = _of_type(template, "AWS::SecretsManager::Secret")
    assert secret["KmsKeyId"] == KEY_ARN


def test_edge_prop_wins_field_by_field_over_the_manifest(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    """GW-EDGE-6 (R3): ``AsyaMesh(edge=...)`` sets the stage throttle's rate and the WAF web ACL; the manifest keeps
    its burst; per-method throttles merge by key (docs/deploy.md, "Edge settings as construct props")."""
    mesh, template, _ = shop
    (stage,) = _of_type(template, "AWS::ApiGateway::Stage")
    settings = {(m["ResourcePath"], m["HttpMethod"]): m for m in stage["MethodSettings"]}
    stage_wide = settings[("/*", "*")]
    assert (stage_wide["ThrottlingRateLimit"], stage_wide["ThrottlingBurstLimit"]) == (50, 20)
    assert settings[("/~1api~1v1~1mesh", "POST")]["ThrottlingRateLimit"] == 1
    by_task = settings[("/~1api~1v1~1mesh~1{task_id}", "GET")]
    assert (by_task["ThrottlingRateLimit"], by_task["ThrottlingBurstLimit"]) == (5, 5)
    (association,) = _of_type(template, "AWS::WAFv2::WebACLAssociation")
    assert association["WebACLArn"] == WAF_ARN
    assert mesh.manifest.gateway.edge.waf_web_acl_arn == WAF_ARN


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        (EdgeProps(waf_web_acl_arn="arn:aws:waf::1:webacl/x"), "edge.waf_web_acl_arn: 'arn:aws:waf::1:webacl/x'"),
        (EdgeProps(burst_limit=-1), "edge.burst_limit: -1"),
        (EdgeProps(domain_name="api.shop.example"), "edge.certificate_arn: missing"),
        (
            EdgeProps(method_throttles={"/api/v1/mesh/FETCH": MethodThrottle(rate_limit=1, burst_limit=1)}),
            "edge.method_throttles: '/api/v1/mesh/FETCH' is not a method key such as '/api/v1/mesh/POST'",
        ),
    ],
)
def test_bad_edge_prop_is_refused_naming_it(tmp_path: Path, edge: EdgeProps, expected: str) -> None:
    """The prop is checked with the construct's other problems, before anything is created; the error names the
    prop's field and its value."""
    stack = _stack()
    with pytest.raises(DeploymentError) as info:
        AsyaMesh(stack, "Default", manifest=_manifest(tmp_path), edge=edge)
    assert expected in str(info.value)
    assert stack.node.try_find_child("Default") is None


def test_alarms_notify_the_manifest_topic(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    _, template, _ = shop
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    # per actor a DLQ and an age alarm, the timer DLQ, x-sump backlog, backstop errors
    assert len(alarms) == 2 * 3 + 3
    for alarm in alarms:
        assert alarm["AlarmActions"] == [TOPIC_ARN]
        assert alarm["OKActions"] == [TOPIC_ARN]


def test_log_retention_from_the_manifest(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    _, template, _ = shop
    groups = _of_type(template, "AWS::Logs::LogGroup")
    assert groups and {g["RetentionInDays"] for g in groups} == {90}


def test_dashboard_rows_per_actor(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    """Issue 19 item 8: queue depth, oldest age, DLQ depth, errors, throttles, duration per actor; task outcomes and
    x-sump failures by reason from the EMF metrics."""
    _, template, _ = shop
    (dashboard,) = _of_type(template, "AWS::CloudWatch::Dashboard")
    assert dashboard["DashboardName"] == "asya-shop-eu-west-1"  # one namespace in two regions: two names
    body = json.dumps(dashboard["DashboardBody"])
    for actor in ("pay", "x-sink", "x-sump"):
        assert f"{actor}: queue" in body and f"{actor}: function" in body
        assert f"asya-shop-{actor}-dlq" in body
    for metric in ("ApproximateAgeOfOldestMessage", "Throttles", "Duration", "Errors"):
        assert metric in body
    assert "FailedEnvelopes" in body and "Reason" in body


def test_no_api_gateway_account_role_when_opted_out(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    _, template, _ = shop
    assert _of_type(template, "AWS::ApiGateway::Account") == []


def test_caller_props_apply_under_the_owned_fields(shop: tuple[AsyaMesh, dict[str, Any], Path]) -> None:
    _, template, _ = shop
    queues = {q["QueueName"]: q for q in _of_type(template, "AWS::SQS::Queue")}
    assert queues["asya-shop-pay"]["DelaySeconds"] == 1
    descriptions = {f.get("Description") for f in _of_type(template, "AWS::Lambda::Function")}
    assert "shop actor" in descriptions


def _stack(region: str | None = "eu-west-1") -> cdk.Stack:
    app = cdk.App()
    return cdk.Stack(app, "S", env=cdk.Environment(region=region) if region else None)


def _manifest(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "asya.yaml"
    data = {k: v for k, v in MANIFEST.items() if k not in ("storage", "observability")}
    path.write_text(yaml.safe_dump({**data, **extra}), encoding="utf-8")
    return path


def test_every_problem_is_reported_at_once_before_anything_is_created(tmp_path: Path) -> None:
    stack = _stack()
    with pytest.raises(DeploymentError) as info:
        AsyaMesh(
            stack,
            "Default",
            manifest=_manifest(tmp_path),
            queue_props=sqs.QueueProps(queue_name="mine", visibility_timeout=cdk.Duration.seconds(5)),
            table_props=dynamodb.TableProps(
                partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING)
            ),
            existing_table_obj=dynamodb.Table.from_table_name(stack, "T", "elsewhere"),
            dead_letter_queue_props=sqs.QueueProps(retention_period=cdk.Duration.days(7)),
        )
    message = str(info.value)
    for expected in (
        "queue_props.queue_name: set by the mesh",
        "queue_props.visibility_timeout: set by the mesh",
        "table_props.partition_key: set by the mesh",
        "existing_table_obj, table_props: give one or the other",
        "dead_letter_queue_props.retention_period: 7 days is not longer",
    ):
        assert expected in message
    assert stack.node.try_find_child("Default") is None


def test_region_without_the_web_adapter_layer_is_refused(tmp_path: Path) -> None:
    """Issue 19 item 11: the pinned map refuses a region it does not cover, naming it and the way out."""
    with pytest.raises(DeploymentError, match=r"region 'cn-north-1': AWS publishes no arm64 Lambda Web Adapter"):
        AsyaMesh(_stack("cn-north-1"), "Default", manifest=_manifest(tmp_path))
    with pytest.raises(DeploymentError, match=r"environment-agnostic stack.*web_adapter_layer"):
        AsyaMesh(_stack(None), "Default", manifest=_manifest(tmp_path))


def test_existing_table_and_bucket_are_used_instead_of_created(tmp_path: Path) -> None:
    stack = _stack()
    table = dynamodb.Table.from_table_attributes(
        stack, "Tasks", table_arn="arn:aws:dynamodb:eu-west-1:111122223333:table/asya-shop-tasks"
    )
    mesh = AsyaMesh(stack, "Default", manifest=_manifest(tmp_path), existing_table_obj=table)
    assert mesh.dynamo_table is None and mesh.dynamo_table_interface is table
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::DynamoDB::Table", 0)
    template.resource_count_is("AWS::S3::Bucket", 1)
    assert "asya-shop-tasks" in json.dumps(template.find_resources("AWS::IAM::Policy"))
