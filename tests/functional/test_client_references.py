"""No client-supplied storage references (GW-REF-1..3), over real HTTP against moto, and references bound to their
task in the layer and the crew (P-LARGE-7).

A storage reference is ``{"__ref__": "s3://<bucket>/payloads/..."}``: the mesh's own claim check for a large payload
(P-LARGE-2). A client that could hand one in would make the next actor read whatever object it names: another
principal's payload, into the attacker's result. So:

- every value a client supplies is refused (400) when it is a reference: the create payload (as before), a resume
  input (REST and A2A) and the producer route's ``data``; an MCP ``tools/call``'s arguments answer an error result;
- a resume input must not carry a ``__ref__`` member at all, since x-resume merges its members into the root of the
  paused payload (and x-resume refuses a merge that ends as a reference);
- a runtime reads a reference only under ``payloads/{id}/`` of the envelope's own id, its parent's or its origin's
  (``x-asya-origin-id``): any other is ``PayloadUnavailable``, and nothing of the object reaches a handler or a result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from asya.config import ActorConfig
from asya.envelope import parse_envelope
from asya.payloads import PayloadStore, PayloadUnavailableError, reference_owners
from asya.store import StatusUpdate, TaskStore
from asya_crew.pause import PauseRuntime
from asya_gateway import GatewayConfig, create_app
from tests.functional.actors import NOW, Context, Harness, actor_env, deliver, drain, queue_arn
from tests.functional.actors import envelope as actor_envelope

pytestmark = pytest.mark.functional

REPORTER_KEY = "reporter-key-1"
VICTIM_KEY = "payloads/victim-task/0001-analyze-0badc0de.json"
SECRET = {"card": "4111 1111 1111 1111"}


def _ref(mesh: Any, key: str = VICTIM_KEY) -> dict[str, str]:
    return {"__ref__": f"s3://{mesh.resources.bucket}/{key}"}


def _plant(mesh: Any, key: str = VICTIM_KEY, value: Any = None) -> dict[str, str]:
    """Another task's offloaded payload, as the layer would have written it."""
    body = json.dumps(SECRET if value is None else value).encode()
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=key, Body=body)
    return _ref(mesh, key)


@pytest.fixture
def client(mesh: Any, serve_asgi: Any) -> Iterator[httpx.Client]:
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    config = GatewayConfig(reporter_keys=(REPORTER_KEY,))
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    with httpx.Client(base_url=serve_asgi(app), timeout=30) as http:
        yield http


def _paused(mesh: Any, client: httpx.Client) -> str:
    """A task paused by x-pause with the default metadata (no fields: the resume input is merged shallowly)."""
    created = client.post("/api/v1/mesh/?actor=request-review", json={"payload": {"text": "mine"}})
    assert created.status_code == 201, created.text
    task_id = str(created.json()["id"])
    [first] = drain(mesh.aws.sqs, mesh.resources.queue_urls["request-review"])
    at_pause = {
        **first,
        "route": {"prev": ["request-review"], "curr": "x-pause", "next": ["publish"]},
        "status": {**first["status"], "actor": "x-pause"},
    }
    config = ActorConfig.from_env(actor_env(mesh, "x-pause"))
    runtime = PauseRuntime(config, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    event = deliver(mesh.aws.sqs, mesh.resources.queue_urls["x-pause"], [at_pause], arn=queue_arn(mesh, "x-pause"))
    assert runtime.handle(event, Context())["batchItemFailures"] == []
    assert client.get(f"/api/v1/mesh/{task_id}").json()["status"] == "paused"
    return task_id


def test_gw_ref_1_a_create_payload_that_is_a_reference_is_refused(mesh: Any, client: httpx.Client) -> None:
    answer = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": _ref(mesh)})
    assert answer.status_code == 400
    assert "storage reference" in answer.json()["error"]


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(_ref, id="the input is a reference"),
        pytest.param(lambda m: {**_ref(m), "approved": True}, id="the input has a __ref__ member"),
    ],
)
def test_gw_ref_2_a_resume_input_that_could_become_a_reference_is_refused(
    mesh: Any, client: httpx.Client, given: Callable[[Any], dict[str, Any]]
) -> None:
    task_id = _paused(mesh, client)
    answer = client.post(f"/api/v1/mesh/{task_id}/resume", json={"input": given(mesh)})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"].startswith("input: must not be or hold a storage reference")
    assert client.get(f"/api/v1/mesh/{task_id}").json()["status"] == "paused"
    assert drain(mesh.aws.sqs, mesh.resources.queue_urls["x-resume"]) == []


def test_gw_ref_2_an_a2a_resume_with_a_reference_is_invalid_params(mesh: Any, client: httpx.Client) -> None:
    task_id = _paused(mesh, client)
    message = {"kind": "message", "role": "user", "messageId": "m", "taskId": task_id}
    message["parts"] = [{"kind": "data", "data": _ref(mesh)}]
    params = {"message": message, "configuration": {"blocking": False}}
    send = {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": params}
    answer = client.post("/a2a/", json=send).json()
    assert answer["error"]["code"] == -32602, answer
    assert "storage reference" in answer["error"]["message"]
    assert client.get(f"/api/v1/mesh/{task_id}").json()["status"] == "paused"


@pytest.mark.parametrize("kind", ["fly", "status"])
def test_gw_ref_1_the_producer_routes_data_must_not_be_a_reference(mesh: Any, client: httpx.Client, kind: str) -> None:
    task_id = client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "hi"}}).json()["id"]
    body: dict[str, Any] = {"type": kind, "data": _ref(mesh)}
    if kind == "status":
        body["status"] = "processing"
    answer = client.post(f"/api/v1/mesh/{task_id}/events", json=body, headers={"X-Asya-Reporter-Key": REPORTER_KEY})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"].startswith("data: must not be a storage reference")


def test_gw_ref_1_mcp_arguments_that_are_a_reference_answer_an_error_result(mesh: Any, serve_asgi: Any) -> None:
    flows = dict(mesh.manifest.flows)  # a tool without an input_schema: its arguments may be any object
    flows["text-pipeline"] = flows["text-pipeline"].model_copy(update={"input_schema": None})
    manifest = mesh.manifest.model_copy(update={"flows": flows})
    app = create_app(GatewayConfig(), manifest=manifest, dynamodb=mesh.aws.dynamodb, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    with httpx.Client(base_url=serve_asgi(app), timeout=30) as client:
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "text-pipeline", "arguments": _ref(mesh)},
        }
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
        session = client.post("/mcp", json=init).headers["mcp-session-id"]
        headers = {"Mcp-Session-Id": session, "Accept": "application/json, text/event-stream"}
        with client.stream("POST", "/mcp", json=call, headers=headers) as response:
            first = next(response.iter_text(), "")
        assert '"isError":true' in first.replace(" ", ""), first
        assert "storage reference" in first
        assert client.get("/api/v1/mesh/").json()["messages"] == [], "no task was created"


# -- the layer and the crew: a reference is read only by the task it belongs to --------------------------------------


def _clock() -> datetime:
    return NOW


@pytest.mark.parametrize(
    ("key", "owners"),
    [
        pytest.param("payloads/other/0001-a-00000000.json", ("mine",), id="another id"),
        pytest.param("payloads/mine-not/0001-a-00000000.json", ("mine",), id="an id that only starts the same"),
        pytest.param("payloads/h.0123456789abcdef0123456789abcdef/x.json", ("mine",), id="a digest folder"),
    ],
)
def test_p_large_7_rehydrate_refuses_a_reference_of_another_envelope(
    mesh: Any, key: str, owners: tuple[str, ...]
) -> None:
    ref = _plant(mesh, key)
    store = PayloadStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3)
    with pytest.raises(PayloadUnavailableError, match="belongs to another task"):
        store.rehydrate(ref, owners=owners)


def test_p_large_7_the_layer_sends_a_foreign_reference_to_x_sump_unread(mesh: Any) -> None:
    ref = _plant(mesh)
    harness = Harness(mesh, "echo", clock=_clock)
    harness.store.create_task(task_id="attacker-task", actor="normalize")
    assert harness.run(actor_envelope("attacker-task", payload=ref))[1] == []
    assert harness.drain("analyze") == [], "the handler never saw the object"
    [sump] = harness.drain("x-sump")
    assert sump["status"]["reason"] == "PayloadUnavailable"
    assert "belongs to another task" in sump["payload"]["error"]
    assert "4111" not in json.dumps(sump)


@pytest.mark.parametrize(
    ("envelope_id", "parent_id", "origin", "owner"),
    [
        pytest.param("t-own", None, None, "t-own", id="its own id"),
        pytest.param("child-1", "t-parent", None, "t-parent", id="its parent's id"),
        pytest.param("merged-1", None, "t-origin", "t-origin", id="its origin's id"),
    ],
)
def test_p_large_7_the_layer_reads_its_own_its_parents_and_its_origins_references(
    mesh: Any, envelope_id: str, parent_id: str | None, origin: str | None, owner: str
) -> None:
    ref = _plant(mesh, f"payloads/{owner}/0000-normalize-0badc0de.json", {"text": "fine"})
    harness = Harness(mesh, "echo", clock=_clock)
    headers: dict[str, Any] = {"x-asya-flow": "text-pipeline"}
    if origin is not None:
        headers["x-asya-origin-id"] = origin
    body = actor_envelope(envelope_id, payload=ref, parent_id=parent_id, headers=headers)
    assert harness.run(body)[1] == []
    [out] = harness.drain("analyze")
    assert out["payload"] == {"text": "fine", "seen": True}


def test_p_large_7_x_sink_never_reads_a_foreign_reference_into_a_result(mesh: Any) -> None:
    from tests.functional.test_sink import Sink
    from tests.functional.test_sink import envelope as sink_envelope

    ref = _plant(mesh)
    sink = Sink(mesh)
    sink.store.create_task(task_id="t1", actor="normalize", flow="text-pipeline")
    assert sink.run(sink_envelope("t1", payload=ref)) == []
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "succeeded"
    assert view["result"] == ref, "kept as the reference it was, unread"
    assert "4111" not in json.dumps(view)


def test_p_large_7_a_retry_from_an_offloaded_step_reads_a_copy_in_the_new_tasks_folder(
    mesh: Any, client: httpx.Client
) -> None:
    """GW-HIST-2: the step's input was offloaded under the old task's id; the new task gets its own copy, so its first
    actor reads it (a reference into the old task's folder would be another task's, P-LARGE-7)."""
    created = client.post("/api/v1/mesh/?flow=sentences", json={"payload": {"text": "A. B."}})
    old_id = str(created.json()["id"])
    drain(mesh.aws.sqs, mesh.resources.queue_urls["split"])
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    old_ref = _plant(mesh, f"payloads/{old_id}/0001-analyze-0badc0de.json", {"text": "large"})
    line = {
        "v": 1,
        "envelope_id": old_id,
        "parent_id": None,
        "actor": "analyze",
        "attempt": 1,
        "hop": 1,
        "message_id": "m-1",
        "started_at": "2026-03-01T10:00:01Z",
        "duration_ms": 1.0,
        "input": {"__truncated__": "300000 bytes"},
        "input_bytes": 300000,
        "input_ref": old_ref["__ref__"],
        "route": {"prev": ["split"], "curr": "analyze", "next": []},
        "headers": {"x-asya-flow": "sentences"},
        "outputs": [],
        "error": None,
        "prev": None,
    }
    key = "history/2026-03-01/0f0f0f0f-0000-4000-8000-000000000001.jsonl"
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=key, Body=json.dumps(line).encode() + b"\n")
    claimed = store.running(
        old_id,
        step="processing",
        actor="analyze",
        route_prev=["split"],
        route_curr="analyze",
        route_next=[],
        claim=(2, 1, 0),
        history=(key, None),
    )
    assert claimed.accepted
    store.apply_status(old_id, StatusUpdate(status="failed", error="boom"))
    answer = client.post(f"/api/v1/mesh/{old_id}/retry", json={"from": "analyze"})
    assert answer.status_code == 201, answer.text
    new_id = answer.json()["id"]
    [first] = drain(mesh.aws.sqs, mesh.resources.queue_urls["analyze"])
    ref = first["payload"]["__ref__"]
    assert ref.startswith(f"s3://{mesh.resources.bucket}/payloads/{new_id}/0001-analyze-"), ref
    envelope = parse_envelope(json.dumps(first))
    assert PayloadStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3).rehydrate(
        first["payload"], owners=reference_owners(envelope)
    ) == {"text": "large"}
