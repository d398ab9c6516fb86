"""GW-CREATE-4 (R2, issue 18 defect 3): whatever nesting the gateway accepts flows through the layer (a function and
a generator actor), x-sink's checkpoint and the task result; one level more is refused at the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.manifest import load_manifest
from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.e2e.conftest import E2E_DIR, Gateway

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def deep_mesh() -> Iterator[LocalMesh]:
    with LocalMesh(load_manifest(E2E_DIR / "nesting" / "asya.yaml"), port=0) as mesh:
        yield mesh


def _nested(depth: int) -> Any:
    """``depth`` containers, alternating objects and arrays, around one string."""
    value: Any = "bottom"
    for level in range(depth):
        value = {"level": level, "inner": value} if level % 2 else [level, value]
    return value


def test_gw_create_4_a_256_level_payload_flows_end_to_end(deep_mesh: LocalMesh) -> None:
    payload = _nested(256)
    response = httpx.post(
        f"{deep_mesh.url}/api/v1/mesh/",
        params={"flow": "deep"},
        json={"payload": payload, "headers": {"deep": payload}},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    task_id = response.json()["id"]
    gateway = Gateway(deep_mesh.url)
    events = gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded", events[-1].data
    task = gateway.get(task_id)
    assert task["status"] == "succeeded"
    assert task["result"] == payload
    s3 = deep_mesh.clients.s3
    checkpoint = json.loads(s3.get_object(Bucket=deep_mesh.resources.bucket, Key=task["checkpoint_key"])["Body"].read())
    assert checkpoint["payload"] == payload
    assert checkpoint["route"]["prev"] == ["echo", "relay"]
    assert checkpoint["headers"]["deep"] == payload, "header values nested as deep travel too"


def test_gw_create_4_257_levels_are_refused_at_the_gateway(deep_mesh: LocalMesh) -> None:
    response = httpx.post(
        f"{deep_mesh.url}/api/v1/mesh/", params={"flow": "deep"}, json={"payload": _nested(257)}, timeout=10
    )
    assert (response.status_code, response.json()) == (400, {"error": "payload nesting exceeds 256 levels"})
