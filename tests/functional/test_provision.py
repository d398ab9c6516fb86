from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.functional


def test_provision_creates_queue_with_dlq_redrive(mesh) -> None:  # type: ignore[no-untyped-def]
    url = mesh.resources.queue_urls["analyze"]
    attrs = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"].endswith(":asya-demo-analyze-dlq")
    assert int(redrive["maxReceiveCount"]) == 5
    assert int(attrs["VisibilityTimeout"]) == (10 * 30 + 10) + 60
    actors = {"normalize", "analyze", "summarize", "split", "chunk", "summarize-chunk", "digest", "x-sink", "x-sump"}
    actors.add("x-fanin-chunk")  # the aggregator chunk's fan_in declaration generates (P-FANIN-1)
    actors.add("x-fanin-flow-triage")  # the aggregator of the compiled triage flow's fan-out (P-FLOW-8)
    actors |= {"request-review", "publish", "x-pause", "x-resume"}  # reviewed-text pauses: x-pause and x-resume
    assert set(mesh.resources.queue_urls) == set(mesh.resources.dlq_urls) == actors | {"x-deadline"}
    table = mesh.aws.dynamodb.describe_table(TableName="asya-demo-tasks")["Table"]
    indexes = {g["IndexName"]: g for g in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"by_created", "by_outcome", "long_deadlines"}  # R2 (GW-DATA-2, GW-BACK-1)
    assert {g["Projection"]["ProjectionType"] for g in indexes.values()} == {"KEYS_ONLY"}
    by_outcome = {k["KeyType"]: k["AttributeName"] for k in indexes["by_outcome"]["KeySchema"]}
    assert by_outcome == {"HASH": "gsi2pk", "RANGE": "gsi1sk"}


def test_gw_back_1_provision_creates_the_deadline_timer_queue_with_its_dlq(mesh) -> None:  # type: ignore[no-untyped-def]
    url = mesh.resources.queue_urls["x-deadline"]
    assert url.endswith("/asya-demo-x-deadline")
    attrs = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"].endswith(":asya-demo-x-deadline-dlq")
    assert int(redrive["maxReceiveCount"]) == 5
    # at least the backstop function's 55 s timeout, as Lambda requires of an SQS event source
    assert int(attrs["VisibilityTimeout"]) == 60
    assert attrs["SqsManagedSseEnabled"] == "true"
    assert mesh.resources.dlq_urls["x-deadline"].endswith("/asya-demo-x-deadline-dlq")
