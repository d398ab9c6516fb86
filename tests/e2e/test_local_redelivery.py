"""A visibility timeout that expires while the handler still runs (P-ACK-7, P-ACK-8, P-SINK-7), end to end.

``linger``'s queue gets a 1 s visibility timeout (lower than a manifest can ask, P-MAN-4, as when Lambda's event
source holds messages before invoking), and its two pollers each have their own runtime, like two Lambda containers.
The first call runs past the visibility timeout, so SQS hands the same message to the second poller, whose claim finds
the hop held under the first call's live lease (P-ACK-8): that copy fails and comes back when the lease ends, and by
then the next hop has claimed, so it is acked as a duplicate. The handler runs once, ``tally`` (the next actor) runs
once, and the task ends with one final status, one result and one checkpoint line; nothing reaches the DLQ.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.client import GatewayClient
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status

pytestmark = pytest.mark.e2e

MANIFEST = Path(__file__).resolve().parent / "redelivery" / "asya.yaml"


@pytest.fixture(scope="module")
def redelivery_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(MANIFEST), port=0) as mesh:
        # pollers stopped first: a receive running across the change would still hide a message for the old timeout
        linger = mesh.esms["linger"]
        linger.stop(timeout=10)
        mesh.clients.sqs.set_queue_attributes(
            QueueUrl=mesh.resources.queue_urls["linger"], Attributes={"VisibilityTimeout": "1"}
        )
        linger.start()
        actors = importlib.import_module("e2e_redelivery_actors")  # imported by the mesh's runtimes
        actors.redelivered = lambda: mesh.esms["linger"].stats.records >= 2
        try:
            yield mesh
        finally:
            actors.redelivered = None


def _in_queue(mesh: LocalMesh, actor: str) -> int:
    attributes = mesh.clients.sqs.get_queue_attributes(
        QueueUrl=mesh.resources.queue_urls[actor],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_p_ack_8_duplicate_delivery_during_a_long_call_yields_one_result(redelivery_mesh: LocalMesh) -> None:
    mesh = redelivery_mesh
    assert mesh.esms["linger"].config.max_concurrency == 2  # the actor's max_concurrency sets its pollers
    response = httpx.post(
        f"{mesh.url}/api/v1/mesh/", params={"flow": "slow"}, json={"payload": {"text": "patience"}}, timeout=10
    )
    assert response.status_code == 201, response.text
    task_id = response.json()["id"]
    with GatewayClient(mesh.url) as client:
        events = list(client.events(task_id).events())
    assert terminal_status(events[-1]) == "succeeded"

    # let every redelivery of the duplicate run out before counting: it comes back when the first call's lease ends
    deadline = time.monotonic() + 60
    while any(_in_queue(mesh, actor) for actor in ("linger", "tally", "x-sink")):
        assert time.monotonic() < deadline, "queues did not drain"
        time.sleep(0.2)

    actors = sys.modules["e2e_redelivery_actors"]
    assert mesh.esms["linger"].stats.records >= 2, "SQS delivered the message twice"
    assert actors.LINGER_CALLS["patience"] == 1, "the duplicate must not reach linger's handler (the hop claim)"
    assert actors.TALLY_CALLS["patience"] == 1, "the duplicate must not reach the next actor"
    dlq = mesh.clients.sqs.get_queue_url(QueueName="asya-e2eredo-linger-dlq")["QueueUrl"]
    attributes = mesh.clients.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"

    task = httpx.get(f"{mesh.url}/api/v1/mesh/{task_id}", timeout=10).json()
    assert task["status"] == "succeeded"
    assert task["result"] == {"text": "patience", "lingered": True, "tallied": 1}
    with GatewayClient(mesh.url) as client:
        replay = list(client.events(task_id).events())
    # the catch-up (no id), then the terminal event itself with the record's last number (GW-SSE-6, GW-SSE-7)
    assert [(e.id is not None, terminal_status(e)) for e in replay if terminal_status(e)] == [
        (False, "succeeded"),
        (True, "succeeded"),
    ]
    listed = mesh.clients.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="succeeded/")
    assert [o["Key"] for o in listed.get("Contents", [])] == [task["checkpoint_key"]]
