"""Overload on the local mesh (docs/http.md GW-OVL-2..5): AWS throttles a share of the mesh's DynamoDB and SQS calls,
the gateway's and the actors' alike, and the mesh slows down without breaking.

moto never throttles: botocore hooks on the mesh's own clients (``before-parameter-build``, as ``chaos/faults.py``
injects) refuse a seeded share of the writes, reads and sends with AWS's throttling codes, as AWS answers once the
SDK's retries are used up. A client creates tasks with an ``Idempotency-Key`` and sends a create again whenever it is
answered 429 or 503 (or 409 while its first try is still settling), as GW-CREATE-R3-6's clients do. Every answer is
429, 503 with ``Retry-After``, or the expected success, never a 500; every key gives exactly one task, and every
task ends ``succeeded``: none is lost, none is left ``pending`` or ``running``.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from asya.manifest import Manifest
from asya_local.mesh import LocalMesh
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

TASKS = 8
#: the share of the targeted calls that AWS throttles
RATE = 0.15
TARGETS = {
    "dynamodb": ("PutItem", "UpdateItem", "GetItem", "BatchGetItem", "Query", "DeleteItem"),
    "sqs": ("SendMessage", "SendMessageBatch"),
}
CODES = {"dynamodb": "ProvisionedThroughputExceededException", "sqs": "RequestThrottled"}


class Throttler:
    """Throttles ``RATE`` of the targeted calls of the mesh's clients, drawn from one seeded generator."""

    def __init__(self, mesh: LocalMesh, seed: int = 34) -> None:
        self._clients = {"dynamodb": mesh.clients.dynamodb, "sqs": mesh.clients.sqs}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.on = True
        self.played: Counter[str] = Counter()

    def attach(self) -> None:
        for service, operations in TARGETS.items():
            for operation in operations:
                self._clients[service].meta.events.register(
                    f"before-parameter-build.{service}.{operation}",
                    self._hook(service, operation),
                    unique_id=f"overload-{service}-{operation}",
                )

    def detach(self) -> None:
        for service, operations in TARGETS.items():
            for operation in operations:
                self._clients[service].meta.events.unregister(
                    f"before-parameter-build.{service}.{operation}", unique_id=f"overload-{service}-{operation}"
                )

    def _hook(self, service: str, operation: str) -> Any:
        def hook(**_: Any) -> None:
            with self._lock:
                hit = self.on and self._random.random() < RATE
                if hit:
                    self.played[f"{service}.{operation}"] += 1
            if hit:
                raise ClientError({"Error": {"Code": CODES[service], "Message": "injected"}}, operation)

        return hook


@pytest.fixture(scope="module")
def mesh(example_manifest: Manifest) -> Iterator[LocalMesh]:
    with LocalMesh(example_manifest, port=0) as running:
        yield running


def _call(client: httpx.Client, method: str, url: str, answers: Counter[int], **kwargs: Any) -> httpx.Response:
    """One request, sent again while the mesh answers it as overloaded (429/503, each with ``Retry-After``)."""
    while True:
        response = client.request(method, url, **kwargs)
        answers[response.status_code] += 1
        if response.status_code in (429, 503):
            assert int(response.headers["retry-after"]) >= 1, response.headers
            time.sleep(0.05)  # a client waits Retry-After; the test only eases off, the answer is what it checks
            continue
        if response.status_code == 409 and "Idempotency-Key" in response.text:
            # the key's release was throttled too: its reservation frees itself after ABANDONED_AFTER
            assert int(response.headers["retry-after"]) >= 1, response.headers
            time.sleep(0.5)
            continue
        return response


def test_gw_ovl_throttled_aws_slows_the_mesh_down_and_loses_nothing(mesh: LocalMesh) -> None:
    throttler = Throttler(mesh)
    answers: Counter[int] = Counter()
    throttler.attach()
    try:
        with httpx.Client(base_url=mesh.url, timeout=60) as client:
            ids = []
            for n in range(TASKS):
                created = _call(
                    client,
                    "POST",
                    "/api/v1/mesh/",
                    answers,
                    params={"flow": "text-pipeline"},
                    json={"payload": {"text": f"overload {n}"}},
                    headers={"Idempotency-Key": f"overload-{n}"},
                )
                assert created.status_code == 201, created.text
                ids.append(created.json()["id"])

            def all_ended() -> bool:
                statuses = [_call(client, "GET", f"/api/v1/mesh/{i}", answers).json()["status"] for i in ids]
                return all(s in ("succeeded", "failed", "canceled") for s in statuses)

            wait_for(all_ended, "every task to end while AWS throttles", limit=600)
            throttler.on = False
            views = [_call(client, "GET", f"/api/v1/mesh/{i}", answers).json() for i in ids]
            listed = _call(client, "GET", "/api/v1/mesh/", answers, params={"flow": "text-pipeline", "limit": 100})
    finally:
        throttler.on = False
        throttler.detach()
    assert 500 not in answers, answers
    assert throttler.played, "no throttling was played"
    assert {v["status"] for v in views} == {"succeeded"}, [(v["id"], v["status"], v.get("error")) for v in views]
    assert len(set(ids)) == TASKS
    # the mesh is this module's own: every task it holds is one of ours, one per key, no stray second task
    assert sorted(t["id"] for t in listed.json()["messages"]) == sorted(ids)
    overloaded = answers[429] + answers[503]
    assert overloaded > 0, answers  # the gateway did meet the throttles, and answered them as overload
    print(f"answers {dict(answers)}; throttled calls {dict(throttler.played)}")
