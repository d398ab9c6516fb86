"""A compiled flow may start with any construct (P-FLOW-5, P-FLOW-30): the gateway's create runs the first
instructions and sends what they stop at. A fan-out's slices leave from the create (children to their actors, slice
0, the task's own envelope, to the flow's aggregator), a pause goes to x-pause, a ``return`` to x-sink; the task
record names the actor its envelope went to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from asya.envelope import Envelope, Route
from asya.flows import start
from asya.manifest import parse_manifest
from asya_gateway import GatewayConfig, create_app
from asya_local.provision import provision
from tests.clocks import ManualClock
from tests.conftest import REGION
from tests.functional.test_gateway_tasks import START

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]
NOW = "2026-03-01T10:00:00Z"
FLOWS = {
    "fans": 'state["r"] = [normalize(state), analyze(state)]\n    state = normalize(state)',
    "maps": 'state["m"] = [normalize(x) for x in state["items"]]',
    "waits": 'state = pause(state, prompt="Go?", fields=[])\n    state = normalize(state)',
    "ends": 'state["done"] = True\n    return state',
}


@pytest.fixture
def gateway(aws: Any, serve_asgi: Any, tmp_path: Path) -> Iterator[tuple[httpx.Client, Any, dict[str, str], Any]]:
    data = yaml.safe_load((REPO / "asya.yaml").read_text())
    for name, body in FLOWS.items():
        source = tmp_path / f"{name}.py"
        source.write_text(f"from asya.flows import flow, pause\n\n\n@flow\ndef {name}(state):\n    {body}\n")
        data["flows"][name] = {"source": str(source), "timeout": 60}
    manifest = parse_manifest(data, base_dir=REPO)
    resources = provision(manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3, region=REGION)
    clock = ManualClock(START)
    from asya.store import TaskStore

    store = TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=aws.dynamodb, s3=aws.s3, clock=clock)
    app = create_app(GatewayConfig(), manifest=manifest, store=store, sqs=aws.sqs, clock=clock)
    with httpx.Client(base_url=serve_asgi(app), timeout=60) as http:
        yield http, aws.sqs, resources.queue_urls, manifest


def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def _create(http: httpx.Client, flow: str, payload: dict[str, Any], **headers: str) -> str:
    response = http.post(f"/api/v1/mesh/?flow={flow}", json={"payload": payload}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_p_flow_30_a_fan_out_first_is_sent_by_the_create(gateway: Any) -> None:
    http, sqs, urls, _ = gateway
    task_id = _create(http, "fans", {"text": "hi"})
    (first,) = _received(sqs, urls["normalize"])
    (second,) = _received(sqs, urls["analyze"])
    (slice0,) = _received(sqs, urls["x-fanin-flow-fans"])
    assert slice0["id"] == task_id and slice0["route"] == {"prev": [], "curr": "x-fanin-flow-fans", "next": []}
    for index, child in enumerate([first, second], start=1):
        assert child["parent_id"] == task_id and child["id"] != task_id
        assert child["route"]["next"] == ["x-fanin-flow-fans"]
        assert child["headers"]["x-asya-fan-in"]["slice_index"] == index
        assert child["payload"] == {"text": "hi"}
    assert slice0["headers"]["x-asya-fan-in"]["set"] == f"{task_id}/0"
    assert http.get(f"/api/v1/mesh/{task_id}").json()["status"] == "pending"


def test_p_flow_30_a_create_sent_again_sends_the_same_slices(gateway: Any) -> None:
    """The slices' ids derive from the task id and hop 0 (as a resumed create would compute them again), so the
    fences of a second send absorb it."""
    http, sqs, urls, manifest = gateway
    task_id = _create(http, "fans", {"text": "hi"})
    sent = {c["id"] for actor in ("normalize", "analyze") for c in _received(sqs, urls[actor])}
    again = start(manifest.flows["fans"].program, Envelope(id=task_id, route=Route([], "", []), payload={}), now=NOW)
    assert {o.envelope.id for o in again[:-1]} == sent and again[-1].envelope.id == task_id


def test_p_flow_30_a_map_first_sends_one_slice_per_item_and_an_empty_one_none(gateway: Any) -> None:
    http, sqs, urls, _ = gateway
    _create(http, "maps", {"items": [{"text": "a"}, {"text": "b"}]})
    assert sorted(c["payload"]["text"] for c in _received(sqs, urls["normalize"])) == ["a", "b"]
    assert len(_received(sqs, urls["x-fanin-flow-maps"])) == 1
    empty = _create(http, "maps", {"items": []})
    (done,) = [e for e in _received(sqs, urls["x-sink"]) if e["id"] == empty]
    assert done["payload"] == {"items": [], "m": []} and done["status"]["phase"] == "succeeded"


def test_p_flow_30_a_pause_first_goes_to_x_pause(gateway: Any) -> None:
    http, sqs, urls, _ = gateway
    task_id = _create(http, "waits", {"text": "hi"})
    (paused,) = _received(sqs, urls["x-pause"])
    assert paused["id"] == task_id and paused["route"]["curr"] == "x-pause"
    # the flow's pause cap (P-WAIT-1: 7 days by default) is the timeout of a pause that names none
    assert paused["headers"]["x-asya-pause"] == {"prompt": "Go?", "fields": [], "timeout": 604800}


def test_p_flow_30_a_return_first_goes_to_x_sink_completed(gateway: Any) -> None:
    http, sqs, urls, _ = gateway
    task_id = _create(http, "ends", {"text": "hi"})
    (done,) = _received(sqs, urls["x-sink"])
    assert done["id"] == task_id and done["payload"] == {"text": "hi", "done": True}
    assert done["status"]["reason"] == "Completed" and "x-asya-flow-state" not in done["headers"]
