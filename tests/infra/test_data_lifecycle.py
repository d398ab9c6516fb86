"""Issue 26 items 8 and 9: the data lifecycle (checkpoint rule, versioning, a customer-managed key over the bucket,
table, queues and log groups, an AWS Backup plan) and the VPC (every function in it, the endpoints, least-privilege
security groups, no NAT), asserted on two synthesized meshes with cdk-nag and cfn-lint:

- ``guarded``: a created key, versioning, a checkpoint rule, a backup plan, a created VPC, tracing and ``api_key``
  (so the KMS, X-Ray and Secrets Manager endpoints are due);
- ``imported``: an existing VPC by id, subnets and route tables, no key; the artifact mesh's loader reads it.

The manifest's own checks of these settings are tests/unit/test_manifest_dataplane.py.

Spec: GATEWAY GW-DATA-7 (the bucket, checkpoints kept unless the manifest expires them), GW-OPS-3 (the gateway's
metric read needs the CloudWatch endpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya_cdk import DeploymentError
from asya_cdk.testing import SynthesizedMesh, build_mesh_app, synthesize_mesh
from asya_deploy import access
from tests.cfn import cfn_lint_findings

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
WriteManifest = Callable[[Mapping[str, Any]], Path]


def _manifest(namespace: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "namespace": namespace,
        "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
        "flows": {"say": {"route": ["echo"]}},
    }
    data.update(extra)
    return data


GUARDED = _manifest(
    "guarded",
    defaults={"tracing": True},
    gateway={"auth": {"mode": "api_key", "api_key_secret": "asya/guarded/keys"}},
    storage={
        "create_kms_key": True,
        "versioning": True,
        "noncurrent_expire_days": 7,
        "checkpoints": {"expire_days": 400, "transition_days": 30, "transition_class": "GLACIER_IR"},
        "backup": {"schedule": "cron(0 4 * * ? *)", "retention_days": 90},
    },
    deployment={"vpc": {}},
)
IMPORTED_VPC = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    "availability_zones": ["us-east-1a", "us-east-1b"],
    "route_table_ids": ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
    "prefix_list_ids": ["pl-63a5400a", "pl-02cd2c6b"],
}
IMPORTED = _manifest("imported", deployment={"vpc": IMPORTED_VPC}, storage={"backup": {}})


def _synth(factory: pytest.TempPathFactory, data: Mapping[str, Any], name: str) -> SynthesizedMesh:
    directory = factory.mktemp(name)
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump(dict(data)), encoding="utf-8")
    return synthesize_mesh(manifest, repo_root=REPO, outdir=directory / "cdk.out")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    return _synth(tmp_path_factory, GUARDED, "cdk-guarded")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    return _synth(tmp_path_factory, IMPORTED, "cdk-imported")


def _one(synth: SynthesizedMesh, cfn_type: str) -> tuple[str, dict[str, Any]]:
    (found,) = synth.of_type(cfn_type).items()
    return found[0], found[1]["Properties"]


def _key_arn(synth: SynthesizedMesh) -> dict[str, Any]:
    key_id, _ = _one(synth, "AWS::KMS::Key")
    return {"Fn::GetAtt": [key_id, "Arn"]}


def _rules(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    _, bucket = _one(synth, "AWS::S3::Bucket")
    return {rule["Id"]: rule for rule in bucket["LifecycleConfiguration"]["Rules"]}


def _functions(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    return {key: res["Properties"] for key, res in synth.of_type("AWS::Lambda::Function").items()}


# --------------------------------------------------------------------------- item 8: lifecycle, key, backup


def test_checkpoints_move_to_the_colder_class_then_expire(guarded: SynthesizedMesh) -> None:
    """GW-DATA-7: checkpoints (and x-sump's unparsed bodies) follow storage.checkpoints; other prefixes keep theirs."""
    rules = _rules(guarded)
    for name, prefix in (("succeeded", "succeeded/"), ("failed", "failed/"), ("unparsed", "unparsed/")):
        rule = rules[f"checkpoints-{name}"]
        assert rule["Prefix"] == prefix
        assert rule["ExpirationInDays"] == 400
        assert rule["Transitions"] == [{"StorageClass": "GLACIER_IR", "TransitionInDays": 30}]
    assert rules["payloads"]["ExpirationInDays"] == 15
    assert rules["tasks"]["ExpirationInDays"] == 30


def test_checkpoints_are_kept_without_a_rule(imported: SynthesizedMesh) -> None:
    """GW-DATA-7's default: no lifecycle rule touches succeeded/ or failed/; no versioning, no noncurrent rule."""
    rules = _rules(imported)
    assert not [r for r in rules if r.startswith("checkpoints-")]
    assert "noncurrent-versions" not in rules
    _, bucket = _one(imported, "AWS::S3::Bucket")
    assert "VersioningConfiguration" not in bucket


def test_versioning_expires_noncurrent_versions(guarded: SynthesizedMesh) -> None:
    _, bucket = _one(guarded, "AWS::S3::Bucket")
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    rule = _rules(guarded)["noncurrent-versions"]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 7}
    assert rule["ExpiredObjectDeleteMarker"] is True


def test_created_key_rotates_and_is_retained_with_the_data(guarded: SynthesizedMesh) -> None:
    (key,) = guarded.of_type("AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"


def test_key_covers_bucket_table_and_every_queue(guarded: SynthesizedMesh) -> None:
    arn = _key_arn(guarded)
    _, bucket = _one(guarded, "AWS::S3::Bucket")
    (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": arn}
    assert rule["BucketKeyEnabled"] is True
    _, table = _one(guarded, "AWS::DynamoDB::Table")
    assert table["SSESpecification"] == {"KMSMasterKeyId": arn, "SSEEnabled": True, "SSEType": "KMS"}
    queues = guarded.of_type("AWS::SQS::Queue")
    assert len(queues) >= 6  # echo, x-sink, x-sump with DLQs, the timer queue and its DLQ
    assert {json.dumps(q["Properties"].get("KmsMasterKeyId")) for q in queues.values()} == {json.dumps(arn)}


def test_key_covers_every_log_group(guarded: SynthesizedMesh) -> None:
    arn = _key_arn(guarded)
    groups = guarded.of_type("AWS::Logs::LogGroup")
    # every function's group (echo, x-sink, x-sump, gateway, stream function, backstop) and the API's access logs
    assert len(groups) >= 7
    assert {json.dumps(g["Properties"].get("KmsKeyId")) for g in groups.values()} == {json.dumps(arn)}


def test_key_policy_lets_cloudwatch_logs_of_this_account_and_region_use_it(guarded: SynthesizedMesh) -> None:
    _, key = _one(guarded, "AWS::KMS::Key")
    (statement,) = [s for s in key["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsOfThisAccount"]
    assert statement["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert {"kms:Encrypt*", "kms:Decrypt*", "kms:GenerateDataKey*"} <= set(statement["Action"])
    condition = json.dumps(statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert "arn:" in condition and ":logs:us-east-1:" in condition and "log-group:*" in condition
    assert "AWS::AccountId" in condition


def test_every_role_gets_the_declared_key_use_on_the_key_only(guarded: SynthesizedMesh) -> None:
    """Every role declares ``key.use`` (asya_deploy.access); with a key each function's policy grants exactly its
    actions on the key's ARN, and no other KMS action anywhere but ``kms:Decrypt`` through Secrets Manager for the
    readers of the reporter keys' secret (GW-EVT-6 (R3)), the edge authorizer's only use of the key."""
    arn = json.dumps(_key_arn(guarded))
    declared = set(access.ACTOR.call("key.use").actions)
    assert all(role.call("key.use").actions == access.ACTOR.call("key.use").actions for role in access.ROLES.values())
    roles_with_key: set[str] = set()
    secret_readers: set[str] = set()
    for policy in guarded.of_type("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            kms_actions = {a for a in actions if a.startswith("kms:")}
            if not kms_actions:
                continue
            assert json.dumps(statement["Resource"]) == arn
            roles = {r["Ref"] for r in policy["Properties"]["Roles"]}
            if "Condition" in statement:
                assert kms_actions == {"kms:Decrypt"}
                via = statement["Condition"]["StringEquals"]["kms:ViaService"]
                assert "secretsmanager." in json.dumps(via)
                secret_readers |= roles
                continue
            assert kms_actions == declared
            roles_with_key |= roles
    function_roles = {fn["Role"]["Fn::GetAtt"][0] for fn in _functions(guarded).values()}
    edge_roles = {role for role in function_roles if role.startswith("GatewayEdgeAuth")}
    assert edge_roles, "the guarded mesh (api_key) has an edge authorizer"
    # the edge authorizer reads the reporter keys' secret and no mesh data: the secret's decrypt only
    assert function_roles - edge_roles <= roles_with_key
    gateway_roles = {role for role in function_roles if role.startswith("Gateway") and role not in edge_roles}
    assert edge_roles | gateway_roles <= secret_readers


def test_reporter_secret_is_encrypted_with_the_mesh_key(guarded: SynthesizedMesh, imported: SynthesizedMesh) -> None:
    """GW-EVT-6 (R3), issue 26 item 8: the created reporter keys' secret uses the mesh's customer-managed key; without
    one, Secrets Manager's AWS managed key (no ``KmsKeyId``)."""
    _, secret = _one(guarded, "AWS::SecretsManager::Secret")
    assert secret["KmsKeyId"] == _key_arn(guarded)
    _, plain = _one(imported, "AWS::SecretsManager::Secret")
    assert "KmsKeyId" not in plain


def test_without_a_key_no_role_has_kms(imported: SynthesizedMesh) -> None:
    assert "kms:" not in json.dumps(imported.of_type("AWS::IAM::Policy"))
    assert not imported.of_type("AWS::KMS::Key")


def test_backup_plan_with_schedule_retention_and_the_table_selected_by_arn(guarded: SynthesizedMesh) -> None:
    vault_id, vault = _one(guarded, "AWS::Backup::BackupVault")
    assert vault["BackupVaultName"] == "asya-guarded-backups"
    assert vault["EncryptionKeyArn"] == _key_arn(guarded)
    assert guarded.resources[vault_id]["DeletionPolicy"] == "Retain"
    _, plan = _one(guarded, "AWS::Backup::BackupPlan")
    (rule,) = plan["BackupPlan"]["BackupPlanRule"]
    assert rule["ScheduleExpression"] == "cron(0 4 * * ? *)"
    assert rule["Lifecycle"] == {"DeleteAfterDays": 90}
    assert rule["TargetBackupVault"] == {"Fn::GetAtt": [vault_id, "BackupVaultName"]}
    _, selection = _one(guarded, "AWS::Backup::BackupSelection")
    table_id, _ = _one(guarded, "AWS::DynamoDB::Table")
    assert selection["BackupSelection"]["Resources"] == [{"Fn::GetAtt": [table_id, "Arn"]}]


def test_no_backup_plan_unless_asked(example_synth: SynthesizedMesh) -> None:
    assert not example_synth.of_type("AWS::Backup::BackupPlan")
    assert not example_synth.of_type("AWS::EC2::VPC")
    assert all("VpcConfig" not in fn for fn in _functions(example_synth).values())


# --------------------------------------------------------------------------- item 9: the VPC


def test_every_function_runs_in_the_vpc_with_the_functions_group(guarded: SynthesizedMesh) -> None:
    groups = {key for key, res in guarded.of_type("AWS::EC2::SecurityGroup").items()}
    (functions_group,) = [g for g in groups if g.startswith("NetworkFunctionsSecurityGroup")]
    subnets = sorted(guarded.of_type("AWS::EC2::Subnet"))
    assert len(subnets) == 2
    functions = _functions(guarded)
    assert len(functions) == 7  # echo, x-sink, x-sump, the gateway, its stream function, the backstop, the authorizer
    for fn in functions.values():
        config = fn["VpcConfig"]
        assert config["SecurityGroupIds"] == [{"Fn::GetAtt": [functions_group, "GroupId"]}]
        assert sorted(s["Ref"] for s in config["SubnetIds"]) == subnets


def test_created_vpc_has_isolated_subnets_and_no_nat_or_internet_gateway(guarded: SynthesizedMesh) -> None:
    assert not guarded.of_type("AWS::EC2::NatGateway")
    assert not guarded.of_type("AWS::EC2::InternetGateway")
    assert not guarded.of_type("AWS::EC2::EIP")
    for route in guarded.of_type("AWS::EC2::Route").values():
        assert "NatGatewayId" not in route["Properties"] and "GatewayId" not in route["Properties"]


def _endpoints(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for res in synth.of_type("AWS::EC2::VPCEndpoint").values():
        service = json.dumps(res["Properties"]["ServiceName"])
        name = service.rsplit(".", 1)[-1].strip('"]} ')
        out[name] = res["Properties"]
    return out


def test_endpoints_for_every_service_the_functions_call(guarded: SynthesizedMesh) -> None:
    """SQS, CloudWatch (GW-OPS-3), KMS (the key), Secrets Manager (api_key), X-Ray (tracing) as interface endpoints
    with private DNS; S3 and DynamoDB as gateway endpoints; no CloudWatch Logs endpoint (Lambda ships logs)."""
    endpoints = _endpoints(guarded)
    assert set(endpoints) == {"sqs", "monitoring", "kms", "secretsmanager", "xray", "s3", "dynamodb"}
    for name in ("sqs", "monitoring", "kms", "secretsmanager", "xray"):
        assert endpoints[name]["VpcEndpointType"] == "Interface"
        assert endpoints[name]["PrivateDnsEnabled"] is True
    for name in ("s3", "dynamodb"):
        assert endpoints[name].get("VpcEndpointType", "Gateway") == "Gateway"
        assert len(endpoints[name]["RouteTableIds"]) == 2


def test_security_groups_are_least_privilege(guarded: SynthesizedMesh) -> None:
    """The functions' group: no ingress, egress 443 only; the endpoints' group: 443 from the functions' group only."""
    groups = guarded.of_type("AWS::EC2::SecurityGroup")
    (functions_group,) = [g for g in groups if g.startswith("NetworkFunctionsSecurityGroup")]
    (endpoints_group,) = [g for g in groups if g.startswith("NetworkEndpointsSecurityGroup")]
    for key in (functions_group, endpoints_group):
        assert "SecurityGroupIngress" not in groups[key]["Properties"] or key == endpoints_group
    egress = groups[functions_group]["Properties"]["SecurityGroupEgress"]
    assert {(rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) for rule in egress} == {("tcp", 443, 443)}
    separate_egress = [r["Properties"] for r in guarded.of_type("AWS::EC2::SecurityGroupEgress").values()]
    assert [(r["FromPort"], r["DestinationSecurityGroupId"]) for r in separate_egress] == [
        (443, {"Fn::GetAtt": [endpoints_group, "GroupId"]})
    ]
    ingress = [r["Properties"] for r in guarded.of_type("AWS::EC2::SecurityGroupIngress").values()]
    assert [(r["FromPort"], r["ToPort"], r["SourceSecurityGroupId"]) for r in ingress] == [
        (443, 443, {"Fn::GetAtt": [functions_group, "GroupId"]})
    ]
    endpoint_egress = groups[endpoints_group]["Properties"]["SecurityGroupEgress"]
    assert all(rule["CidrIp"] == "255.255.255.255/32" for rule in endpoint_egress)  # CDK's "no egress" marker


def test_imported_vpc_uses_its_subnets_route_tables_and_prefix_lists(imported: SynthesizedMesh) -> None:
    assert not imported.of_type("AWS::EC2::VPC")
    assert not imported.of_type("AWS::EC2::Subnet")
    for fn in _functions(imported).values():
        assert fn["VpcConfig"]["SubnetIds"] == IMPORTED_VPC["subnet_ids"]
    endpoints = _endpoints(imported)
    assert set(endpoints) == {"sqs", "monitoring", "secretsmanager", "s3", "dynamodb"}
    assert endpoints["s3"]["VpcId"] == IMPORTED_VPC["vpc_id"]
    assert sorted(endpoints["dynamodb"]["RouteTableIds"]) == IMPORTED_VPC["route_table_ids"]
    groups = imported.of_type("AWS::EC2::SecurityGroup")
    (functions_group,) = [g for g in groups if g.startswith("NetworkFunctionsSecurityGroup")]
    # every egress rule is a resource of its own; the inline marker keeps EC2 from adding its allow-all default
    (marker,) = groups[functions_group]["Properties"]["SecurityGroupEgress"]
    assert marker["CidrIp"] == "255.255.255.255/32"
    egress = [r["Properties"] for r in imported.of_type("AWS::EC2::SecurityGroupEgress").values()]
    assert {(r["FromPort"], r["ToPort"]) for r in egress} == {(443, 443)}
    assert sorted(r["DestinationPrefixListId"] for r in egress if "DestinationPrefixListId" in r) == sorted(
        IMPORTED_VPC["prefix_list_ids"]
    )
    assert len(egress) == 3  # the two prefix lists and the endpoints' group


def test_artifact_mesh_loads_a_vpc_template(imported: SynthesizedMesh) -> None:
    """The artifact mesh reads a VPC-enabled assembly (VPC, endpoints, security groups, VpcConfig, the backup plan)
    and runs its VPC-free path: every function, queue and event source is still there."""
    from asya_local.artifact.model import read_mesh
    from asya_local.artifact.template import load_assembly

    spec = read_mesh(load_assembly(imported.outdir, endpoint_url="http://127.0.0.1:1"))
    assert len(spec.functions) == len(_functions(imported))
    assert len(spec.queues) == len(imported.of_type("AWS::SQS::Queue"))
    for inert in ("AWS::EC2::VPCEndpoint", "AWS::EC2::SecurityGroup", "AWS::Backup::BackupPlan"):
        assert spec.inert[inert] >= 1
    gateway_policies = json.dumps([fn.policies for fn in spec.functions.values()])
    assert "ec2:CreateNetworkInterface" in gateway_policies  # AWSLambdaVPCAccessExecutionRole was resolved


# --------------------------------------------------------------------------- validation


def test_vpc_without_internet_refuses_jwt_and_callback_url(write_manifest: WriteManifest, tmp_path: Path) -> None:
    auth = {"mode": "jwt", "jwks_url": "https://idp.example/jwks", "issuer": "https://idp.example", "audience": "a"}
    path = write_manifest(
        _manifest("nonat", deployment={"vpc": {}}, gateway={"auth": auth, "callback_url": "https://hooks.example/asya"})
    )
    with pytest.raises(DeploymentError) as info:
        build_mesh_app(path, repo_root=REPO, outdir=tmp_path / "out")
    message = str(info.value)
    assert "gateway.auth.mode: 'jwt'" in message and "https://idp.example/jwks" in message
    assert "gateway.callback_url: 'https://hooks.example/asya'" in message
    assert message.count("internet_egress: true") == 2


@pytest.mark.parametrize("name", ["guarded", "imported"])
def test_cfn_lint_is_clean_on_the_vpc_and_key_templates(name: str, request: pytest.FixtureRequest) -> None:
    synth: SynthesizedMesh = request.getfixturevalue(name)
    template = synth.outdir / f"{synth.built.stack.artifact_id}.template.json"
    findings = cfn_lint_findings(template.read_text(encoding="utf-8"))
    assert findings == []


def test_construct_vpc_prop_places_every_function_in_its_subnets(tmp_path: Path) -> None:
    """The construct's ``vpc`` / ``vpc_subnets`` (an ``IVpc`` of the caller's app) instead of the manifest's block;
    together with ``deployment.vpc.vpc_id`` they are refused, naming both."""
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_

    from asya_cdk import AsyaMesh

    manifest = tmp_path / "asya.yaml"
    manifest.write_text(yaml.safe_dump(_manifest("ownvpc")), encoding="utf-8")
    app = cdk.App(outdir=str(tmp_path / "out"), analytics_reporting=False)
    stack = cdk.Stack(app, "Own", env=cdk.Environment(region="eu-west-1"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    mesh = AsyaMesh(
        stack,
        "Default",
        manifest=manifest,
        vpc=vpc,
        vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
    )
    assert mesh.network is not None and mesh.network.vpc is vpc
    # resolved in place, no synthesis: the subnet ids each function's VpcConfig names
    private = [stack.resolve(subnet.subnet_id) for subnet in vpc.private_subnets]
    functions = [c for c in mesh.node.find_all() if isinstance(c, lambda_.Function)]
    assert len(functions) == 6
    for fn in functions:
        cfn = fn.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        assert stack.resolve(cfn.vpc_config.subnet_ids) == private  # type: ignore[union-attr]

    other = cdk.Stack(cdk.App(outdir=str(tmp_path / "out2")), "Other", env=cdk.Environment(region="eu-west-1"))
    manifest.write_text(yaml.safe_dump(_manifest("ownvpc", deployment={"vpc": IMPORTED_VPC})), encoding="utf-8")
    with pytest.raises(DeploymentError, match=r"vpc, deployment.vpc.vpc_id 'vpc-0123456789abcdef0': give one"):
        AsyaMesh(other, "Default", manifest=manifest, vpc=ec2.Vpc(other, "Vpc"))
