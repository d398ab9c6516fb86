"""Envelopes left in the queue of an actor the manifest no longer declares (LOCAL-ORPHAN-1), against moto: the local
mesh's sweeper sends each to x-sump, which fails its task at once, and deletes the emptied queue, so that senders
naming the actor get ``UnknownActor`` themselves; the diagnostic reports the removed actor instead of refusing it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya import naming
from asya_gateway import GatewayConfig, create_app
from tests.functional.actors import NOW, drain
from tests.functional.actors import envelope as actor_envelope
from tests.functional.test_sump import Sump

pytestmark = pytest.mark.functional

GONE = "old-step"


def _orphan_queue(mesh: Any) -> str:
    """The queue an earlier manifest's actor ``GONE`` left behind, with its DLQ."""
    sqs, namespace = mesh.aws.sqs, mesh.resources.namespace
    tags = {"asya-namespace": namespace}  # as the earlier mesh's provision tagged it
    sqs.create_queue(QueueName=naming.dlq_name(namespace, GONE), tags=tags)
    return str(sqs.create_queue(QueueName=naming.queue_name(namespace, GONE), tags=tags)["QueueUrl"])


def _sweeper(mesh: Any) -> Any:
    from asya_local.orphans import OrphanSweeper  # imported here: the sweeper is the fix this file tests

    provisioned = [*mesh.resources.queue_urls.values(), *mesh.resources.dlq_urls.values()]
    return OrphanSweeper(namespace=mesh.resources.namespace, sqs=mesh.aws.sqs, provisioned=provisioned)


def test_local_orphan_1_a_removed_actors_envelopes_fail_their_tasks_at_once(mesh: Any) -> None:
    url = _orphan_queue(mesh)
    sump = Sump(mesh)
    store = mesh.store(lambda: NOW)
    ids = [f"task-{i}" for i in range(4)]
    for task_id in ids:
        store.create_task(task_id=task_id, actor=GONE, flow="text-pipeline")
        body = actor_envelope(task_id, curr=GONE, nxt=[])
        mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody="{not an envelope")

    assert _sweeper(mesh).sweep() == (5, 0)

    arrived = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sump"])
    reasons = sorted(m["status"]["reason"] for m in arrived)
    assert reasons == ["ParseError", *["UnknownActor"] * 4]
    assert sump.run(*arrived)[0] == []
    for task_id in ids:
        view = store.get_task(task_id)
        assert view is not None and view["status"] == "failed", view
        assert f"actor '{GONE}' is no longer in the manifest" in view["error"]
    names = [u.rsplit("/", 1)[-1] for u in mesh.aws.sqs.list_queues(QueueNamePrefix="asya-")["QueueUrls"]]
    assert naming.queue_name(mesh.resources.namespace, GONE) not in names, "the emptied queue is deleted"
    assert naming.dlq_name(mesh.resources.namespace, GONE) in names, "its DLQ is kept for inspection"
    assert _sweeper(mesh).sweep() == (0, 0)


def test_local_orphan_1_the_mesh_own_queues_and_another_namespaces_are_never_swept(mesh: Any) -> None:
    url = mesh.resources.queue_urls["analyze"]
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(actor_envelope("t-1", curr="analyze")))
    # namespace "demo-x" shares the prefix asya-demo-: its queue is no orphan of "demo"
    other = mesh.aws.sqs.create_queue(QueueName="asya-demo-x-analyze", tags={"asya-namespace": "demo-x"})["QueueUrl"]
    mesh.aws.sqs.send_message(QueueUrl=other, MessageBody="{}")
    assert _sweeper(mesh).sweep() == (0, 0)
    assert len(drain(mesh.aws.sqs, url)) == 1
    assert len(drain(mesh.aws.sqs, other)) == 1


@pytest.fixture
def client(mesh: Any, serve_asgi: Any) -> Iterator[httpx.Client]:
    aws = mesh.aws
    app = create_app(GatewayConfig(), manifest=mesh.manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    with httpx.Client(base_url=serve_asgi(app), timeout=30) as http:
        yield http


def test_gw_ops_5_the_diagnostic_reports_an_undeclared_actor_instead_of_refusing_it(
    mesh: Any, client: httpx.Client
) -> None:
    url = _orphan_queue(mesh)
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody="{}")
    answer = client.post("/api/v1/system/mq-diagnostic", json={"actors": [GONE, "analyze"]})
    assert answer.status_code == 200, answer.text
    gone, analyze = answer.json()["queues"]
    assert (gone["actor"], gone["declared"], gone["exists"], gone["depth"]) == (GONE, False, True, 1)
    assert (analyze["declared"], analyze["exists"]) == (True, True)
    assert answer.json()["healthy"] is False, "an undeclared queue that holds envelopes is unhealthy"
    mesh.aws.sqs.delete_queue(QueueUrl=url)
    again = client.post("/api/v1/system/mq-diagnostic", json={"actors": [GONE]}).json()
    assert (again["queues"][0]["exists"], again["healthy"]) == (False, True), "gone and nothing stranded: healthy"
    bad = client.post("/api/v1/system/mq-diagnostic", json={"actors": ["Not A Name"]})
    assert bad.status_code == 400 and "'Not A Name' is not an actor name" in bad.json()["error"]
