"""Overload on the artifact mesh (docs/http.md GW-OVL-2, GW-OVL-4), where the functions run as separate processes:
the IAM proxy's fault rules (``asya_local.iam.faults``) answer their DynamoDB calls with AWS's throttling error, as
AWS does once the SDK's retries are used up. Through API Gateway's front the client gets 429 with ``Retry-After``,
never a 500; the create sent again with its ``Idempotency-Key`` makes one task, which ends ``succeeded``; an actor
whose writes are throttled slows its task down and loses nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from asya_local.iam import FaultRule
from tests.waiting import wait_for

pytestmark = pytest.mark.artifact

THROTTLED = "ProvisionedThroughputExceededException"


def _ended(client: httpx.Client, task_id: str) -> dict[str, Any] | None:
    view: dict[str, Any] = client.get(f"/api/v1/mesh/{task_id}").json()
    return view if view["status"] in ("succeeded", "failed", "canceled") else None


def test_gw_ovl_a_throttled_gateway_answers_429_and_the_keyed_retry_makes_one_task(artifact_mesh: Any) -> None:
    proxy = artifact_mesh.proxy
    # every attempt of the gateway's client (2) at its first write, the key's reservation
    proxy.faults.add(FaultRule(action="dynamodb:PutItem", code=THROTTLED, times=2))
    try:
        with httpx.Client(base_url=artifact_mesh.url, timeout=60) as client:
            body = {"payload": {"text": "busy day"}}
            headers = {"Idempotency-Key": "artifact-overload-1"}
            refused = client.post("/api/v1/mesh/", params={"flow": "text-pipeline"}, json=body, headers=headers)
            assert refused.status_code == 429, (refused.text, proxy.faults.played)
            assert refused.headers["retry-after"] == "2"
            created = client.post("/api/v1/mesh/", params={"flow": "text-pipeline"}, json=body, headers=headers)
            assert created.status_code == 201, created.text
            again = client.post("/api/v1/mesh/", params={"flow": "text-pipeline"}, json=body, headers=headers)
            assert again.json()["id"] == created.json()["id"]
            view = wait_for(lambda: _ended(client, created.json()["id"]), "the task to end")
    finally:
        proxy.faults.clear()
    assert view["status"] == "succeeded", view
    assert [code for _, _, code in proxy.faults.played[-2:]] == [THROTTLED, THROTTLED]


def test_gw_ovl_an_actor_whose_writes_are_throttled_slows_down_and_loses_nothing(artifact_mesh: Any) -> None:
    proxy = artifact_mesh.proxy
    played = len(proxy.faults.played)
    # the hop claims and status writes of the actors (a create writes no UpdateItem): 6 throttles, more than one
    # record's SDK attempts, so a record fails and comes back
    proxy.faults.add(FaultRule(action="dynamodb:UpdateItem", code=THROTTLED, times=6))
    try:
        with httpx.Client(base_url=artifact_mesh.url, timeout=60) as client:
            body = {"payload": {"text": "slow"}}
            created = client.post("/api/v1/mesh/", params={"flow": "text-pipeline"}, json=body)
            assert created.status_code == 201, created.text
            view = wait_for(lambda: _ended(client, created.json()["id"]), "the throttled task to end", limit=300)
    finally:
        proxy.faults.clear()
    assert view["status"] == "succeeded", view
    assert len(proxy.faults.played) > played, "no write was throttled"
