"""The run history's cut marker cannot be forged by a payload (P-HIST-7), against moto.

A recorded body over the cut size is kept as ``{"__truncated__": "<n> bytes"}``, and ``retry --from`` refuses a step
whose input was cut (409). A real payload may look exactly like that marker: it must replay like any other input. A
line says whether its input was cut in ``input_cut`` (and each output in ``cut``); a line written before that member
existed is judged by its sizes (a cut input's recorded marker is never as large as ``input_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.history import cut_body
from asya.store import StatusUpdate, TaskStore
from asya_gateway import GatewayConfig, create_app
from tests.functional.actors import drain

pytestmark = pytest.mark.functional

LOOKALIKE = {"__truncated__": "5 bytes"}


@pytest.fixture
def client(mesh: Any, serve_asgi: Any) -> Iterator[httpx.Client]:
    app = create_app(
        GatewayConfig(), manifest=mesh.manifest, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    with httpx.Client(base_url=serve_asgi(app), timeout=30) as http:
        yield http


def _ended_with_step(mesh: Any, client: httpx.Client, line: dict[str, Any]) -> str:
    """A failed task of ``sentences`` whose history holds ``line`` as its step at ``analyze``."""
    created = client.post("/api/v1/mesh/?flow=sentences", json={"payload": {"text": "A. B."}})
    task_id = str(created.json()["id"])
    drain(mesh.aws.sqs, mesh.resources.queue_urls["split"])
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    full = {
        "v": 1,
        "envelope_id": task_id,
        "parent_id": None,
        "actor": "analyze",
        "attempt": 1,
        "hop": 1,
        "message_id": "m-1",
        "started_at": "2026-03-01T10:00:01Z",
        "duration_ms": 1.0,
        "input_ref": None,
        "route": {"prev": ["split"], "curr": "analyze", "next": []},
        "headers": {"x-asya-flow": "sentences"},
        "outputs": [],
        "error": None,
        "prev": None,
        **line,
    }
    key = "history/2026-03-01/0f0f0f0f-0000-4000-8000-000000000002.jsonl"
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=key, Body=json.dumps(full).encode() + b"\n")
    claim = store.running(
        task_id,
        step="processing",
        actor="analyze",
        route_prev=["split"],
        route_curr="analyze",
        route_next=[],
        claim=(2, 1, 0),
        history=(key, None),
    )
    assert claim.accepted
    store.apply_status(task_id, StatusUpdate(status="failed", error="boom"))
    return task_id


@pytest.mark.parametrize(
    "line",
    [
        pytest.param({"input": LOOKALIKE, "input_bytes": 27, "input_cut": False}, id="a line with input_cut"),
        pytest.param({"input": LOOKALIKE, "input_bytes": 27}, id="an older line, judged by its sizes"),
    ],
)
def test_p_hist_7_a_payload_that_looks_like_the_cut_marker_replays(
    mesh: Any, client: httpx.Client, line: dict[str, Any]
) -> None:
    task_id = _ended_with_step(mesh, client, line)
    answer = client.post(f"/api/v1/mesh/{task_id}/retry", json={"from": "analyze"})
    assert answer.status_code == 201, answer.text
    [first] = drain(mesh.aws.sqs, mesh.resources.queue_urls["analyze"])
    assert first["payload"] == LOOKALIKE


@pytest.mark.parametrize(
    "line",
    [
        pytest.param({"input": {"__truncated__": "9000 bytes"}, "input_bytes": 9000, "input_cut": True}, id="flag"),
        pytest.param({"input": {"__truncated__": "9000 bytes"}, "input_bytes": 9000}, id="older line"),
    ],
)
def test_p_hist_7_a_cut_input_is_still_refused(mesh: Any, client: httpx.Client, line: dict[str, Any]) -> None:
    task_id = _ended_with_step(mesh, client, line)
    answer = client.post(f"/api/v1/mesh/{task_id}/retry", json={"from": "analyze"})
    assert answer.status_code == 409 and "was cut" in answer.json()["error"], answer.text


def test_p_hist_7_the_layer_says_whether_it_cut_a_body() -> None:
    assert cut_body(LOOKALIKE, 4096) == (LOOKALIKE, 27, False)
    assert cut_body({"text": "x" * 5000}, 4096) == ({"__truncated__": "5011 bytes"}, 5011, True)
