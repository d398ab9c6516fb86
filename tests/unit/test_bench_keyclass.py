"""Key classes of AWS calls (bench.keyclass): the partition template a call lands on, for the capacity vectors."""

from __future__ import annotations

import pytest

from asya.tableschema import checkpoint_key, history_key
from bench.keyclass import call_class, key_template

pytestmark = pytest.mark.unit

ID = "0d133ff3-04fc-479e-8faf-aa5688648cdf"


def test_ids_days_hashes_and_numbers_become_placeholders() -> None:
    assert key_template(f"TASK#{ID}") == "TASK#{id}"
    assert key_template("TASKS#2026-12-07#5") == "TASKS#{day}#{n}"
    assert key_template("IDEMP#" + "ab" * 32) == "IDEMP#{hash}"
    assert key_template("OUTCOME#failed#2026-12-07#3") == "OUTCOME#{status}#{day}#{n}"


def test_a_create_put_names_the_task_item_and_the_created_index_shard() -> None:
    item = {"pk": {"S": f"TASK#{ID}"}, "sk": {"S": "TASK"}, "gsi1pk": {"S": "TASKS#2026-12-07#5"}}
    assert (
        call_class("dynamodb", "PutItem", {"TableName": "t", "Item": item}, namespace="demo")
        == "table:TASK#{id}/TASK+by_created:TASKS#{day}#{shard}"
    )


def test_an_update_that_sets_an_index_key_through_an_alias_names_that_index() -> None:
    params = {
        "Key": {"pk": {"S": f"TASK#{ID}"}, "sk": {"S": "TASK"}},
        "UpdateExpression": "SET #s = :s, #g2 = :g REMOVE #g3",
        "ExpressionAttributeNames": {"#s": "status", "#g2": "gsi2pk", "#g3": "gsi3pk"},
    }
    assert (
        call_class("dynamodb", "UpdateItem", params, namespace="demo")
        == "table:TASK#{id}/TASK+by_outcome:OUTCOME#{status}#{day}#{shard}+long_deadlines:LONGDL#{shard}"
    )


def test_queues_and_prefixes() -> None:
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/asya-demo-x-deadline"
    assert call_class("sqs", "SendMessage", {"QueueUrl": url}, namespace="demo") == "queue:x-deadline"
    key = f"succeeded/2026-12-07/{ID}.jsonl"
    assert call_class("s3", "PutObject", {"Bucket": "b", "Key": key}, namespace="demo") == "s3:succeeded/{day}/"
    for key in (checkpoint_key("failed", "2026-12-07", ID), history_key("2026-12-07", ID)):
        sharded = key.split("/")[0] + "/{shard}/{day}/"
        assert call_class("s3", "PutObject", {"Bucket": "b", "Key": key}, namespace="demo") == f"s3:{sharded}"
    # a prefix that is not sharded keeps its first part as it is
    assert call_class("s3", "PutObject", {"Bucket": "b", "Key": f"payloads/a/{ID}.json"}, namespace="x") == (
        "s3:payloads/a/"
    )


def test_a_batch_get_names_every_item_class_it_reads() -> None:
    keys = [{"pk": {"S": f"TASK#{ID}"}, "sk": {"S": "TASK"}}, {"pk": {"S": f"TASK#{ID}"}, "sk": {"S": "TASK"}}]
    params = {"RequestItems": {"t": {"Keys": keys}}}
    assert call_class("dynamodb", "BatchGetItem", params, namespace="demo") == "table:TASK#{id}/TASK"
