"""The local mode creates what the CDK app deploys: the queues, DLQs and table that ``asya_local.provision`` makes in
moto carry the names and settings of the synthesized template (P-NAME-4, P-MAN-4, P-ACK-6, GW-DATA-2), and the actor
runtimes get the environment the template sets on the Lambdas (``asya_deploy.environment``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya.manifest import Manifest
from asya_cdk.testing import SynthesizedMesh
from asya_local.mesh import runtime_environment
from asya_local.provision import provision

pytestmark = pytest.mark.infra


def _template_queues(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    """Queue name -> the settings that matter, with the redrive target by queue name."""
    queues = synth.of_type("AWS::SQS::Queue")
    name_of = {key: res["Properties"]["QueueName"] for key, res in queues.items()}
    out = {}
    for res in queues.values():
        props = res["Properties"]
        redrive = props.get("RedrivePolicy")
        out[props["QueueName"]] = {
            "VisibilityTimeout": props.get("VisibilityTimeout", 30),
            "MessageRetentionPeriod": props["MessageRetentionPeriod"],
            "SqsManagedSseEnabled": props["SqsManagedSseEnabled"],
            "redrive": None
            if redrive is None
            else (name_of[redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]], int(redrive["maxReceiveCount"])),
        }
    return out


def _local_queues(aws: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for name in names:
        url = aws.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attrs = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attrs["RedrivePolicy"]) if "RedrivePolicy" in attrs else None
        out[name] = {
            "VisibilityTimeout": int(attrs["VisibilityTimeout"]),
            "MessageRetentionPeriod": int(attrs["MessageRetentionPeriod"]),
            "SqsManagedSseEnabled": attrs["SqsManagedSseEnabled"] == "true",
            "redrive": None
            if redrive is None
            else (redrive["deadLetterTargetArn"].rsplit(":", 1)[1], int(redrive["maxReceiveCount"])),
        }
    return out


def test_provisioned_queues_match_the_template(
    example_synth: SynthesizedMesh, example_manifest: Manifest, aws: Any
) -> None:
    provision(example_manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    actors = {name for actor in example_manifest.deployed_actors() for name in (actor.name, f"{actor.name}-dlq")}
    # the actors' queues; the deadline timer queue (GW-BACK-1) is provisioned with the local backstop's timers
    deployed = {
        name: props
        for name, props in _template_queues(example_synth).items()
        if name.removeprefix(f"asya-{example_manifest.namespace}-") in actors
    }
    assert len(deployed) == 2 * len(example_manifest.deployed_actors())
    assert _local_queues(aws, sorted(deployed)) == {name: deployed[name] for name in sorted(deployed)}


def test_provisioned_table_matches_the_template(
    example_synth: SynthesizedMesh, example_manifest: Manifest, aws: Any
) -> None:
    provision(example_manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    (table,) = (res["Properties"] for res in example_synth.of_type("AWS::DynamoDB::Table").values())
    local = aws.dynamodb.describe_table(TableName=table["TableName"])["Table"]
    assert local["KeySchema"] == table["KeySchema"]
    assert sorted(local["AttributeDefinitions"], key=str) == sorted(table["AttributeDefinitions"], key=str)
    assert {g["IndexName"]: g["KeySchema"] for g in local["GlobalSecondaryIndexes"]} == {
        g["IndexName"]: g["KeySchema"] for g in table["GlobalSecondaryIndexes"]
    }
    # GW-DATA-8: the same projections, so listing (which reads the task items after the index) behaves alike
    assert {g["IndexName"]: g["Projection"] for g in local["GlobalSecondaryIndexes"]} == {
        g["IndexName"]: g["Projection"] for g in table["GlobalSecondaryIndexes"]
    }


def test_runtime_environment_is_the_template_environment_plus_the_code_dir(
    example_synth: SynthesizedMesh, example_manifest: Manifest, aws: Any
) -> None:
    resources = provision(example_manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    # the template holds references for the table and bucket names, the local mode moto's names: compared apart
    names = ("ASYA_TABLE", "ASYA_BUCKET", "ASYA_ACCOUNT_ID")
    deployed: dict[str, dict[str, Any]] = {}
    for res in example_synth.of_type("AWS::Lambda::Function").values():
        env = res["Properties"].get("Environment", {}).get("Variables", {})
        if "ASYA_ACTOR" in env:
            # GW-CREATE-7: queue URLs are built from the account; in AWS it is the stack's, locally moto's
            assert env["ASYA_ACCOUNT_ID"] == {"Ref": "AWS::AccountId"}
            deployed[env["ASYA_ACTOR"]] = {key: value for key, value in env.items() if key not in names}
    assert set(deployed) == {actor.name for actor in example_manifest.deployed_actors()}
    for actor in example_manifest.deployed_actors():
        local = runtime_environment(example_manifest, actor, resources)
        assert (local.pop("ASYA_TABLE"), local.pop("ASYA_BUCKET")) == (resources.table, resources.bucket)
        assert local.pop("ASYA_CODE_DIR", None) == (None if actor.crew else str(actor.code_dir))
        assert local.pop("ASYA_ACCOUNT_ID", "123456789012") == "123456789012"
        assert local == deployed[actor.name], actor.name
