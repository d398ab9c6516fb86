"""Alarms and the deadline backstop of the synthesized example mesh (PROTOCOL P-ACK-6, P-TIME-9; GATEWAY GW-BACK-1,
GW-BACK-2): every DLQ alarmed and kept 14 days, the x-sump backlog alarm, the backstop's error alarm, its handler
module shipped in its code asset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asya import naming, tableschema
from asya.manifest import Manifest
from asya_cdk.actor import AGE_ALARM_SECONDS
from asya_cdk.observability import BACKSTOP_ERROR_MINUTES, SUMP_BACKLOG_MINUTES
from asya_cdk.permissions import DEADLINE_INDEXES
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra

NS = "demo"
FOURTEEN_DAYS = 14 * 24 * 3600


def _ref_id(value: Any) -> str:
    if isinstance(value, str):
        return value  # a queue metric built from the queue's name (asya_cdk.observability)
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def _queue_ids(synth: SynthesizedMesh) -> dict[str, str]:
    return {res["Properties"]["QueueName"]: key for key, res in synth.of_type("AWS::SQS::Queue").items()}


def _alarms_on(synth: SynthesizedMesh, dimension: str, resource_id: str) -> list[dict[str, Any]]:
    return [
        alarm["Properties"]
        for alarm in synth.of_type("AWS::CloudWatch::Alarm").values()
        if any(d["Name"] == dimension and _ref_id(d["Value"]) == resource_id for d in alarm["Properties"]["Dimensions"])
    ]


def _backstop(synth: SynthesizedMesh) -> tuple[str, dict[str, Any]]:
    (rule,) = synth.of_type("AWS::Events::Rule").values()
    (target,) = rule["Properties"]["Targets"]
    key = _ref_id(target["Arn"])
    return key, synth.of_type("AWS::Lambda::Function")[key]["Properties"]


def test_p_ack_6_each_dlq_has_one_depth_alarm_and_keeps_messages_14_days(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    queues = _queue_ids(example_synth)
    resources = example_synth.resources
    for actor in example_manifest.deployed_actors():
        dlq = queues[naming.dlq_name(NS, actor.name)]
        assert resources[dlq]["Properties"]["MessageRetentionPeriod"] == FOURTEEN_DAYS
        (alarm,) = _alarms_on(example_synth, "QueueName", dlq)
        assert resources[queues[naming.queue_name(NS, actor.name)]]["Properties"]["MessageRetentionPeriod"] < (
            FOURTEEN_DAYS
        )
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
        assert (alarm["EvaluationPeriods"], alarm["Period"], alarm["Statistic"]) == (1, 60, "Maximum")
        assert alarm["TreatMissingData"] == "notBreaching"
        assert naming.dlq_name(NS, actor.name) in alarm["AlarmDescription"]


def test_x_sump_backlog_alarm(example_synth: SynthesizedMesh) -> None:
    sump = naming.queue_name(NS, naming.SUMP)
    (alarm,) = _alarms_on(example_synth, "QueueName", sump)
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["Statistic"] == "Maximum"
    assert alarm["Period"] == 60
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == SUMP_BACKLOG_MINUTES
    assert alarm["TreatMissingData"] == "notBreaching"
    # no other queue than the DLQs and x-sump is alarmed on depth
    queues = _queue_ids(example_synth)
    alarmed = {
        _ref_id(d["Value"])
        for alarm in example_synth.of_type("AWS::CloudWatch::Alarm").values()
        if alarm["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
        for d in alarm["Properties"]["Dimensions"]
        if d["Name"] == "QueueName"
    }
    assert alarmed == {key for name, key in queues.items() if name.endswith("-dlq")} | {sump}


def test_every_queue_has_an_oldest_message_age_alarm(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    """Issue 19 item 8: the age of the oldest message of every actor queue is alarmed."""
    queues = _queue_ids(example_synth)
    for actor in example_manifest.deployed_actors():
        (alarm,) = [
            a
            for a in _alarms_on(example_synth, "QueueName", queues[naming.queue_name(NS, actor.name)])
            if a["MetricName"] == "ApproximateAgeOfOldestMessage"
        ]
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", AGE_ALARM_SECONDS)
        assert alarm["TreatMissingData"] == "notBreaching"
        assert "AlarmActions" not in alarm  # no topic in the example manifest


def test_gw_back_1_backstop_error_alarm_and_no_async_retries(example_synth: SynthesizedMesh) -> None:
    key, _ = _backstop(example_synth)
    (alarm,) = _alarms_on(example_synth, "FunctionName", key)
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/Lambda", "Errors", "Sum")
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == BACKSTOP_ERROR_MINUTES
    (config,) = example_synth.of_type("AWS::Lambda::EventInvokeConfig").values()
    assert _ref_id(config["Properties"]["FunctionName"]) == key
    assert config["Properties"]["MaximumRetryAttempts"] == 0


def test_gw_back_1_backstop_handler_ships_in_its_code_asset(example_synth: SynthesizedMesh) -> None:
    """The handler the schedule invokes exists in the function's code (the asset the stack deploys)."""
    _, props = _backstop(example_synth)
    module, function = props["Handler"].rsplit(".", 1)
    asset = example_synth.outdir / f"asset.{props['Code']['S3Key'].removesuffix('.zip')}"
    source = asset / (module.replace(".", "/") + ".py")
    assert source.is_file(), source
    assert f"def {function}(event: Any, context: Any)" in source.read_text(encoding="utf-8")
    # the handler reads the gateway's manifest for the namespace and table (GatewayConfig)
    manifest_path = Path(props["Environment"]["Variables"]["ASYA_MANIFEST"])
    assert manifest_path.parent == Path("/var/task")
    assert (asset / manifest_path.name).is_file()


def test_gw_back_2_backstop_may_query_the_deadline_index(example_synth: SynthesizedMesh) -> None:
    _, props = _backstop(example_synth)
    role = _ref_id(props["Role"])
    statements = [
        statement
        for policy in example_synth.of_type("AWS::IAM::Policy").values()
        if role in {_ref_id(r) for r in policy["Properties"]["Roles"]}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    rendered = str(statements)
    assert "dynamodb:Query" in rendered and "dynamodb:UpdateItem" in rendered
    deadline_indexes = [gsi.name for gsi in tableschema.GSIS if gsi.name in DEADLINE_INDEXES]
    assert deadline_indexes
    assert all(f"/index/{name}" in rendered for name in deadline_indexes)
    assert "s3:" not in rendered  # the backstop never touches the bucket
