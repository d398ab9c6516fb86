"""``asya_local.artifact.update``: what a new assembly changes in a running artifact mesh, the refusal of a change that
would replace the table or the bucket (as CloudFormation fails it, before anything changes), and the resource part of
the update applied to moto with its data kept. ``tests/e2e/artifact/test_artifact_redeploy.py`` runs a whole update of a
running mesh."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from asya_local.artifact.model import BucketSpec, EventSource, FunctionSpec, MeshSpec, QueueSpec, TableSpec
from asya_local.artifact.provision import provision_spec
from asya_local.artifact.update import (
    ReplacementError,
    UpdateError,
    apply_resources,
    plan_update,
    remove_resources,
)
from asya_local.moto_server import AwsClients

pytestmark = pytest.mark.functional

REGION = "us-east-1"
ACCOUNT = "123456789012"
ENDPOINT = "https://sqs.us-east-1.amazonaws.com"


def _queue(name: str, **attributes: str) -> QueueSpec:
    return QueueSpec(
        f"Queue{name.title().replace('-', '')}",
        name,
        f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
        {"VisibilityTimeout": "60", **attributes},
    )


def _index(name: str, key: str) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }


def _table(*indexes: dict[str, Any], name: str = "upd-tasks", key: str = "pk", ttl: str | None = "ttl") -> TableSpec:
    attributes = [{"AttributeName": key, "AttributeType": "S"}]
    attributes += [{"AttributeName": i["KeySchema"][0]["AttributeName"], "AttributeType": "S"} for i in indexes]
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": attributes,
        "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if indexes:
        kwargs["GlobalSecondaryIndexes"] = list(indexes)
    return TableSpec("TaskTable", name, f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}", kwargs, ttl)


def _bucket(name: str = "upd-storage", *, expire_days: int | None = 15) -> BucketSpec:
    properties: dict[str, Any] = {"BucketName": name}
    if expire_days is not None:
        properties["LifecycleConfiguration"] = {
            "Rules": [{"Id": "payloads", "Prefix": "payloads/", "ExpirationInDays": expire_days, "Status": "Enabled"}]
        }
    return BucketSpec("StorageBucket", name, properties)


def _function(actor: str, *, code: Path, env: dict[str, str] | None = None, policy: str = "sqs:*") -> FunctionSpec:
    name = f"upd-{actor}"
    return FunctionSpec(
        logical_id=f"Fn{actor.title()}",
        name=name,
        arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
        handler="asya_lambda.handler",
        runtime="python3.12",
        code_dir=code,
        layer_dirs=(),
        external_layers=(),
        environment={"ASYA_ACTOR": actor, **(env or {})},
        timeout=10,
        memory=256,
        role_arn=f"arn:aws:iam::{ACCOUNT}:role/{name}",
        policies=({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": policy, "Resource": "*"}]},),
    )


def _source(function: FunctionSpec, queue: QueueSpec) -> EventSource:
    return EventSource(f"Esm{function.logical_id}", function.arn, queue.arn, 10, 0.0, True, None, True)


def _spec(
    *,
    queues: list[QueueSpec],
    functions: list[FunctionSpec] | None = None,
    table: TableSpec | None = None,
    bucket: BucketSpec | None = None,
    secrets: list[str] | None = None,
) -> MeshSpec:
    functions = functions or []
    spec = MeshSpec(
        queues={q.arn: q for q in queues},
        tables=[table or _table()],
        buckets=[bucket or _bucket()],
        functions={f.arn: f for f in functions},
        secrets=list(secrets or []),
    )
    by_actor = {q.name.removeprefix("upd-"): q for q in queues}
    spec.event_sources = [
        _source(f, by_actor[f.environment["ASYA_ACTOR"]]) for f in functions if f.environment["ASYA_ACTOR"] in by_actor
    ]
    return spec


# -- refusals -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "prop"),
    [
        (_table(name="upd-tasks-v2"), "TableName"),
        (_table(key="id"), "KeySchema"),
        (
            dataclasses.replace(
                _table(),
                create_kwargs={
                    **_table().create_kwargs,
                    "LocalSecondaryIndexes": [_index("by_day", "pk")],
                },
            ),
            "LocalSecondaryIndexes",
        ),
    ],
)
def test_a_change_that_replaces_the_table_is_refused_naming_the_logical_id_and_the_property(
    after: TableSpec, prop: str
) -> None:
    old = _spec(queues=[_queue("upd-a")])
    new = _spec(queues=[_queue("upd-a")], table=after)
    with pytest.raises(ReplacementError) as caught:
        plan_update(old, new)
    assert (caught.value.logical_id, caught.value.prop) == ("TaskTable", prop)
    assert "TaskTable" in str(caught.value) and prop in str(caught.value)


def test_a_renamed_or_dropped_table_is_refused() -> None:
    old = _spec(queues=[])
    new = _spec(queues=[])
    new.tables = [dataclasses.replace(_table(), logical_id="TasksTable")]
    with pytest.raises(ReplacementError, match=r"table TaskTable .* gone from the new template") as caught:
        plan_update(old, new)
    assert (caught.value.logical_id, caught.value.prop) == ("TaskTable", "")


def test_a_change_that_replaces_the_bucket_is_refused() -> None:
    old = _spec(queues=[])
    with pytest.raises(ReplacementError, match="bucket StorageBucket: BucketName changes") as caught:
        plan_update(old, _spec(queues=[], bucket=_bucket("upd-storage-2")))
    assert (caught.value.logical_id, caught.value.prop) == ("StorageBucket", "BucketName")
    dropped = _spec(queues=[])
    dropped.buckets = []
    with pytest.raises(ReplacementError, match=r"bucket StorageBucket .* gone"):
        plan_update(old, dropped)


def test_an_index_changed_in_place_or_two_index_moves_are_refused_as_cloudformation_refuses_them() -> None:
    old = _spec(queues=[], table=_table(_index("by_day", "day")))
    reprojected = _index("by_day", "day") | {"Projection": {"ProjectionType": "ALL"}}
    with pytest.raises(UpdateError, match="by_day changes its key schema or projection") as caught:
        plan_update(old, _spec(queues=[], table=_table(reprojected)))
    assert not isinstance(caught.value, ReplacementError)
    assert caught.value.prop == "GlobalSecondaryIndexes"
    with pytest.raises(UpdateError, match="2 global secondary indexes are added or removed"):
        plan_update(old, _spec(queues=[], table=_table(_index("by_day", "day"), _index("a", "a"), _index("b", "b"))))


def test_a_fifo_flag_changed_under_the_same_queue_name_is_refused() -> None:
    with pytest.raises(UpdateError, match="FifoQueue") as caught:
        plan_update(_spec(queues=[_queue("upd-a")]), _spec(queues=[_queue("upd-a", FifoQueue="true")]))
    assert caught.value.logical_id == "QueueUpdA"


# -- the diff ------------------------------------------------------------------------------------------------------


def test_the_diff_compares_code_by_asset_not_by_the_assembly_it_sits_in(tmp_path: Path) -> None:
    """The same asset hash in another ``cdk.out`` is the same code (Lambda's code is not updated); another hash, an
    environment or a policy change is a change."""
    one, two = tmp_path / "v1" / "asset.aaa", tmp_path / "v2" / "asset.aaa"
    changed_code = tmp_path / "v2" / "asset.bbb"
    old = _spec(
        queues=[_queue("upd-a"), _queue("upd-b"), _queue("upd-gone")],
        functions=[
            _function("a", code=one),
            _function("b", code=one),
            _function("c", code=one),
            _function("gone", code=one),
        ],
        secrets=["upd-key", "upd-old-key"],
    )
    new = _spec(
        queues=[_queue("upd-a"), _queue("upd-b", VisibilityTimeout="120"), _queue("upd-new")],
        functions=[
            _function("a", code=two),
            _function("b", code=changed_code),
            _function("c", code=two, env={"ASYA_FLOWS": "{}"}, policy="s3:*"),
            _function("new", code=two),
        ],
        secrets=["upd-key", "upd-new-key"],
    )
    change = plan_update(old, new)
    assert change.summary() == {
        "queues added": ["upd-new"],
        "queues removed": ["upd-gone"],
        "queues changed": ["upd-b"],
        "functions added": ["FnNew"],
        "functions removed": ["FnGone"],
        "functions changed": ["FnB", "FnC"],
        "policies changed": ["FnC"],
        "secrets added": ["upd-new-key"],
        "secrets removed": ["upd-old-key"],
        "event sources added": ["EsmFnNew"],
        "event sources removed": ["EsmFnGone"],
    }
    assert plan_update(old, old).summary() == {}


# -- applied to moto ------------------------------------------------------------------------------------------------


def test_the_resources_are_updated_in_place_and_their_data_kept(aws: AwsClients) -> None:
    """Provisioned as v1, then updated to v2: a queue created (with its redrive to a new DLQ), one deleted with its
    messages, a changed attribute set and a dropped one back to SQS's default, an index added and the TTL attribute
    changed on the table, the bucket's lifecycle rule removed; the table's item, the bucket's object and the kept
    queue's message are still there."""
    dlq = _queue("upd-new-dlq")
    redrive = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": "5"})
    old = _spec(queues=[_queue("upd-a", DelaySeconds="5"), _queue("upd-gone")], table=_table(), bucket=_bucket())
    new = _spec(
        queues=[_queue("upd-a", VisibilityTimeout="90"), _queue("upd-new", RedrivePolicy=redrive), dlq],
        table=_table(_index("by_day", "day"), ttl="expires"),
        bucket=_bucket(expire_days=None),
    )
    provision_spec(old, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3, region=REGION)
    url = aws.sqs.get_queue_url(QueueName="upd-a")["QueueUrl"]
    endpoint = url.removesuffix(f"/{ACCOUNT}/upd-a")
    aws.sqs.send_message(QueueUrl=url, MessageBody="kept", DelaySeconds=0)
    aws.dynamodb.put_item(TableName="upd-tasks", Item={"pk": {"S": "task-1"}})
    aws.s3.put_object(Bucket="upd-storage", Key="paused/task-1.json", Body=b"{}")

    change = plan_update(old, new)
    apply_resources(change, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3, region=REGION, endpoint=endpoint)
    # the removed queue goes only in the clean-up, after the functions are replaced
    assert aws.sqs.get_queue_url(QueueName="upd-gone")["QueueUrl"]
    remove_resources(change, sqs=aws.sqs, region=REGION, endpoint=endpoint)

    names = {u.rsplit("/", 1)[1] for u in aws.sqs.list_queues(QueueNamePrefix="upd-").get("QueueUrls", [])}
    assert names == {"upd-a", "upd-new", "upd-new-dlq"}
    attributes = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attributes["VisibilityTimeout"], attributes["DelaySeconds"]) == ("90", "0")
    new_url = aws.sqs.get_queue_url(QueueName="upd-new")["QueueUrl"]
    new_attributes = aws.sqs.get_queue_attributes(QueueUrl=new_url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(new_attributes["RedrivePolicy"])["deadLetterTargetArn"] == dlq.arn
    table = aws.dynamodb.describe_table(TableName="upd-tasks")["Table"]
    assert [index["IndexName"] for index in table.get("GlobalSecondaryIndexes", [])] == ["by_day"]
    ttl = aws.dynamodb.describe_time_to_live(TableName="upd-tasks")["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl.get("AttributeName")) == ("ENABLED", "expires")
    with pytest.raises(aws.s3.exceptions.ClientError) as no_rules:
        aws.s3.get_bucket_lifecycle_configuration(Bucket="upd-storage")
    assert no_rules.value.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"

    assert aws.dynamodb.get_item(TableName="upd-tasks", Key={"pk": {"S": "task-1"}})["Item"]["pk"] == {"S": "task-1"}
    assert aws.s3.get_object(Bucket="upd-storage", Key="paused/task-1.json")["Body"].read() == b"{}"
    received = aws.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in received] == ["kept"]
