"""The ``mesh`` fixture's isolation: the example mesh is provisioned once per worker (``tests/sharedmoto.py``), and
what one test writes (a message, in flight or not, an item, an object, a secret) is gone in the next, while the
queues are the same ones. A test that deletes a queue or changes its settings leaves the next one the mesh as
provisioned.

The tests run in order on one worker (``make test`` hands each module whole to one xdist worker); a test whose
predecessor did not run in this process (``-k`` picked it alone) skips, saying so.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Mesh

pytestmark = pytest.mark.functional

#: What each test left for the next one to check, by the writing test's name.
_LEFT: dict[str, Any] = {}


def _created(mesh: Mesh, actor: str) -> str:
    attributes = mesh.aws.sqs.get_queue_attributes(
        QueueUrl=mesh.resources.queue_urls[actor], AttributeNames=["CreatedTimestamp"]
    )["Attributes"]
    return str(attributes["CreatedTimestamp"])


def _previous(name: str) -> Any:
    if name not in _LEFT:
        pytest.skip(f"{name} did not run before this test in this process: run the module whole")
    return _LEFT.pop(name)


def _message_counts(mesh: Mesh) -> dict[str, int]:
    counts = {}
    for url in [*mesh.resources.queue_urls.values(), *mesh.resources.dlq_urls.values()]:
        attributes = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        counts[url] = sum(
            int(attributes[key])
            for key in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            )
        )
    return counts


def test_a_test_writes_a_message_an_item_and_an_object(mesh: Mesh) -> None:
    sqs = mesh.aws.sqs
    queue = mesh.resources.queue_urls["normalize"]
    sqs.send_message(QueueUrl=queue, MessageBody="in flight")
    assert sqs.receive_message(QueueUrl=queue, VisibilityTimeout=600)["Messages"]  # invisible, not deleted
    sqs.send_message(QueueUrl=queue, MessageBody="waiting")
    sqs.send_message(QueueUrl=mesh.resources.queue_urls["normalize"], MessageBody="delayed", DelaySeconds=900)
    sqs.send_message(QueueUrl=mesh.resources.dlq_urls["normalize"], MessageBody="dead")
    mesh.aws.dynamodb.put_item(TableName=mesh.resources.table, Item={"pk": {"S": "t-1"}, "sk": {"S": "meta"}})
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key="payloads/t-1", Body=b"{}")
    mesh.aws.session.client("secretsmanager").create_secret(Name="asya/demo/api-keys", SecretString="k")
    assert sum(_message_counts(mesh).values()) == 4
    _LEFT["write"] = _created(mesh, "normalize")


def test_the_next_test_sees_none_of_it_in_the_same_queues(mesh: Mesh) -> None:
    created = _previous("write")
    assert _created(mesh, "normalize") == created, "the mesh was provisioned again instead of reset"
    assert set(_message_counts(mesh).values()) == {0}
    assert mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"] == []
    assert mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket).get("KeyCount") == 0
    assert mesh.aws.sqs.receive_message(QueueUrl=mesh.resources.queue_urls["normalize"]).get("Messages") is None
    assert mesh.aws.session.client("secretsmanager").list_secrets()["SecretList"] == []


def _visibility(mesh: Mesh, actor: str) -> str:
    url = mesh.resources.queue_urls[actor]
    return str(
        mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["VisibilityTimeout"]
    )


def test_a_test_deletes_a_queue_and_changes_another(mesh: Mesh) -> None:
    sqs = mesh.aws.sqs
    _LEFT["break"] = _visibility(mesh, "x-sink")
    sqs.delete_queue(QueueUrl=mesh.resources.queue_urls["normalize"])
    sqs.set_queue_attributes(QueueUrl=mesh.resources.queue_urls["x-sink"], Attributes={"VisibilityTimeout": "0"})
    sqs.create_queue(QueueName="left-behind")


def test_the_next_test_gets_the_mesh_as_provisioned(mesh: Mesh) -> None:
    visibility = _previous("break")
    listed = {url.rsplit("/", 1)[-1] for url in mesh.aws.sqs.list_queues(MaxResults=1000)["QueueUrls"]}
    provisioned = [*mesh.resources.queue_urls.values(), *mesh.resources.dlq_urls.values()]
    assert listed == {url.rsplit("/", 1)[-1] for url in provisioned}
    assert _visibility(mesh, "x-sink") == visibility != "0"


def test_a_test_without_the_mesh_gets_an_empty_moto(aws: Any) -> None:
    assert aws.sqs.list_queues().get("QueueUrls", []) == []
    assert aws.dynamodb.list_tables()["TableNames"] == []
    assert aws.s3.list_buckets()["Buckets"] == []
