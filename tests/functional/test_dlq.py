"""The DLQ library against moto (P-ACK-6): depth, peek without consuming, redrive by copy (body, attributes and
trace header kept; limit; a send confirmed before each delete)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya.store import TaskStore
from asya_local.dlq import DeadLetters, DlqError

pytestmark = pytest.mark.functional


def _dead(mesh: Any) -> DeadLetters:
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    return DeadLetters(mesh.manifest, sqs=mesh.aws.sqs, store=store)


def _put(mesh: Any, actor: str, body: str, **kwargs: Any) -> None:
    mesh.aws.sqs.send_message(QueueUrl=mesh.resources.dlq_urls[actor], MessageBody=body, **kwargs)


def _drain(mesh: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while batch := mesh.aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
    ).get("Messages", []):
        out.extend(batch)
        for message in batch:
            mesh.aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


def test_p_ack_6_depths_of_every_deployed_actor(mesh: Any) -> None:
    _put(mesh, "analyze", "{}")
    _put(mesh, "analyze", "{}")
    depths = {d.actor: (d.dlq, d.visible, d.in_flight) for d in _dead(mesh).depths()}
    assert set(depths) == {a.name for a in mesh.manifest.deployed_actors()}  # the aggregator x-fanin-chunk too
    assert depths["analyze"] == ("asya-demo-analyze-dlq", 2, 0)
    assert depths["normalize"] == ("asya-demo-normalize-dlq", 0, 0)


def test_peek_describes_messages_and_leaves_them_in_the_queue(mesh: Any) -> None:
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="normalize")
    envelope = {"id": "t1", "route": {"prev": [], "curr": "normalize", "next": []}, "status": {"phase": "pending"}}
    _put(mesh, "normalize", json.dumps(envelope))
    _put(mesh, "normalize", "not json")
    _put(mesh, "normalize", json.dumps({"id": "gone", "route": {"curr": "normalize"}}))

    peeked = {m.task_id: m for m in _dead(mesh).peek("normalize")}
    assert set(peeked) == {"t1", None, "gone"}
    assert (peeked["t1"].actor, peeked["t1"].phase, peeked["t1"].task_status) == ("normalize", "pending", "pending")
    assert peeked["t1"].receive_count == 1 and peeked["t1"].sent_at is not None
    assert "max_receive_count" in peeked["t1"].reason
    assert peeked[None].reason == "body is not JSON (not an envelope)"
    assert peeked["gone"].task_status is None  # no task record
    assert _dead(mesh).depths("normalize")[0].visible == 3
    assert len(_dead(mesh).peek("normalize", limit=2)) == 2


def test_redrive_copy_keeps_body_attributes_and_trace_header(mesh: Any) -> None:
    attributes = {"kind": {"DataType": "String", "StringValue": "envelope"}}
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    _put(
        mesh,
        "summarize",
        '{"id": "t9"}',
        MessageAttributes=attributes,
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
    )
    sent: list[dict[str, Any]] = []
    mesh.aws.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: sent.extend(params["Entries"])
    )
    result = _dead(mesh).redrive("summarize", method="copy")
    assert (result.moved, result.failed, result.not_deleted) == (1, 0, 0)
    [moved] = _drain(mesh, mesh.resources.queue_urls["summarize"])
    assert moved["Body"] == '{"id": "t9"}'
    assert moved["MessageAttributes"]["kind"]["StringValue"] == "envelope"
    # moto 5.2.5 drops MessageSystemAttributes in SendMessageBatch (AWS keeps them): check the request instead
    assert sent[0]["MessageSystemAttributes"] == {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
    assert moved["Attributes"]["ApproximateReceiveCount"] == "1"  # a fresh count on the actor queue
    assert _drain(mesh, mesh.resources.dlq_urls["summarize"]) == []


def test_redrive_limit_moves_at_most_that_many(mesh: Any) -> None:
    for i in range(12):
        _put(mesh, "split", json.dumps({"id": f"t{i}"}))
    assert _dead(mesh).redrive("split", method="copy", limit=11).moved == 11
    assert len(_drain(mesh, mesh.resources.queue_urls["split"])) == 11
    assert len(_drain(mesh, mesh.resources.dlq_urls["split"])) == 1
    assert _dead(mesh).redrive("split", method="copy").moved == 0  # empty DLQ: nothing to do


def test_bad_arguments_name_the_value(mesh: Any) -> None:
    dead = _dead(mesh)
    with pytest.raises(DlqError, match="unknown actor 'nope': mesh 'demo' deploys analyze, chunk, digest, normalize"):
        dead.depths("nope")
    with pytest.raises(DlqError, match="limit must be >= 1, got 0"):
        dead.peek("split", limit=0)
    with pytest.raises(DlqError, match="limit works only with method 'copy'"):
        dead.redrive("split", method="move-task", limit=3)
    other = DeadLetters(mesh.manifest.model_copy(update={"namespace": "other"}), sqs=mesh.aws.sqs)
    with pytest.raises(DlqError, match="queue asya-other-split-dlq does not exist at https://sqs"):
        other.depths("split")
