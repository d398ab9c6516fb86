"""Gateway REST routes against moto: create (GW-CREATE-*), view (GW-TASK-*), list (GW-LIST-*), cancel (GW-CANCEL-*),
producer events (GW-EVT-*), general rules (GW-GEN-*), health (GW-OPS-1) and the read-path backstop (GW-BACK-3)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya.envelope import parse_envelope
from asya.manifest import StorageConfig
from asya.store import StatusUpdate, TaskStore
from asya_gateway import GatewayConfig, create_app
from asya_gateway.tracing import is_valid_traceparent
from tests.asgi import asgi_client
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

REPORTER_KEY = "reporter-key"

START = datetime(2026, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)


@dataclass
class Gw:
    client: httpx.Client
    store: TaskStore
    clock: ManualClock
    mesh: Any

    def receive(self, actor: str) -> list[dict[str, Any]]:
        url = self.mesh.resources.queue_urls[actor]
        messages = self.mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(m["Body"]) for m in messages]

    def create(self, query: str, body: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        response = self.client.post(f"/api/v1/mesh/?{query}", json=body or {}, **kwargs)
        assert response.status_code == 201, response.text
        result: dict[str, Any] = response.json()
        return result


@pytest.fixture
def gw(mesh: Any) -> Iterator[Gw]:
    clock = ManualClock(START)
    store = mesh.store(clock)
    config = GatewayConfig(reporter_keys=(REPORTER_KEY,))
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=clock)
    # the producer route takes the reporter key (GW-EVT-1 R3); the other routes ignore it (auth mode none)
    with asgi_client(app, headers={"X-Asya-Reporter-Key": REPORTER_KEY}) as client:
        yield Gw(client=client, store=store, clock=clock, mesh=mesh)


# ---------------------------------------------------------------- create


def test_create_by_flow_sends_envelope_to_first_actor_gw_create_7_9(gw: Gw) -> None:
    """Also P-TIME-1: ``deadline_at`` = creation time (10:00:00.5) + the flow's 120 s, truncated to whole seconds."""
    response = gw.client.post("/api/v1/mesh/?flow=text-pipeline", json={"payload": {"text": "Hello World"}})
    assert response.status_code == 201
    answer = response.json()
    task_id = answer["id"]
    assert answer == {"id": task_id, "status": "pending", "deadline_at": "2026-03-01T10:02:00Z"}
    assert response.headers["location"] == f"/api/v1/mesh/{task_id}"
    [body] = gw.receive("normalize")
    envelope = parse_envelope(body)
    assert envelope.id == task_id
    assert envelope.route.to_dict() == {"prev": [], "curr": "normalize", "next": ["analyze", "summarize"]}
    assert envelope.payload == {"text": "Hello World"}
    assert envelope.headers["x-asya-flow"] == "text-pipeline"
    assert envelope.headers["x-asya-progress"] == "hops"
    assert is_valid_traceparent(envelope.headers["traceparent"])
    assert body["status"] == {
        "phase": "pending",
        "actor": "normalize",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:00Z",
        "deadline_at": "2026-03-01T10:02:00Z",
    }
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert view["status"] == "pending"
    assert view["flow"] == "text-pipeline"
    assert view["actor"] == "normalize"
    assert view["last_event_id"] == 1
    assert view["deadline_at"] == "2026-03-01T10:02:00Z"
    assert view["payload"] == {"text": "Hello World"}


def test_create_by_actor_has_no_deadline_unless_timeout_gw_create_6(gw: Gw) -> None:
    """Also P-TIME-1: ``deadline_at`` only when a timeout applies, then creation time + timeout, truncated."""
    plain = gw.create("actor=analyze", {"payload": [1, 2]})
    assert "deadline_at" not in plain
    timed = gw.create("actor=analyze", {"payload": None, "timeout": 30})
    assert timed["deadline_at"] == "2026-03-01T10:00:30Z"
    bodies = {b["id"]: b for b in gw.receive("analyze")}
    assert bodies[plain["id"]]["route"] == {"prev": [], "curr": "analyze", "next": []}
    assert "deadline_at" not in bodies[plain["id"]]["status"]
    assert "x-asya-flow" not in bodies[plain["id"]]["headers"]
    assert bodies[timed["id"]]["status"]["deadline_at"] == "2026-03-01T10:00:30Z"
    assert gw.client.get(f"/api/v1/mesh/{plain['id']}").json()["flow"] is None


def test_create_flow_timeout_overrides_default_and_headers_are_kept_gw_create_5(gw: Gw) -> None:
    override = {"analyze": "summarize"}
    created = gw.create(
        "flow=sentences",
        {"payload": {"text": "a. b."}, "timeout": 10, "headers": {"x-user": "u1", "x-asya-route-override": override}},
    )
    assert created["deadline_at"] == "2026-03-01T10:00:10Z"
    [body] = gw.receive("split")
    assert body["headers"]["x-user"] == "u1"
    assert body["headers"]["x-asya-route-override"] == override
    assert body["headers"]["x-asya-flow"] == "sentences"


def test_create_continues_http_traceparent_p_trace_2(gw: Gw) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    gw.create(
        "actor=analyze", {"headers": {"traceparent": "garbage"}}, headers={"traceparent": parent, "tracestate": "k=v"}
    )
    [body] = gw.receive("analyze")
    assert body["headers"]["traceparent"] == parent
    assert body["headers"]["tracestate"] == "k=v"


def test_create_starts_new_trace_for_invalid_traceparent_p_trace_2(gw: Gw) -> None:
    gw.create("actor=analyze", headers={"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"})
    [body] = gw.receive("analyze")
    assert is_valid_traceparent(body["headers"]["traceparent"])
    assert "00000000000000000000000000000000" not in body["headers"]["traceparent"]


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


DEEP_257 = _nested(257)
NULL_PAYLOAD = (
    'payload does not match input_schema: $: the payload is null or missing; send the input as {"payload": <input>}'
)

BAD_CREATES: list[tuple[str, dict[str, Any], int, str]] = [
    ("", {}, 400, "actor or flow query parameter required"),
    ("actor=analyze&flow=text-pipeline", {}, 400, "use either actor or flow, not both"),
    (
        "actor=nope",
        {},
        404,
        "actor not found: nope (actors: analyze, chunk, digest, normalize, publish, request-review, split, summarize, "
        "summarize-chunk)",
    ),
    ("actor=x-sink", {}, 400, "actor 'x-sink' is reserved for crew"),
    ("flow=nope", {}, 404, "flow not found: nope (flows: documents, reviewed-text, sentences, text-pipeline, triage)"),
    (
        "actor=analyze",
        {"route": ["a"]},
        400,
        "routing fields are not allowed in the body: 'route'; the entry point is ?actor= or ?flow=",
    ),
    (
        "actor=analyze",
        {"extra": 1},
        400,
        """unknown field 'extra': the task input goes under 'payload', as in {"payload": {"extra": ...}}; """
        "the body fields are payload, headers and timeout",
    ),
    (
        "flow=text-pipeline",
        {},
        400,
        NULL_PAYLOAD,
    ),
    (
        "flow=text-pipeline",
        {"payload": None},
        400,
        NULL_PAYLOAD,
    ),
    (
        "actor=analyze",
        {"headers": {"x-asya-route-override": {"analyze": "x-sink"}}},
        400,
        "header 'x-asya-route-override' must not name crew actor 'x-sink'",
    ),
    (
        "flow=text-pipeline",
        {"payload": {"text": "t"}, "headers": {"x-asya-route-override": {"summarize": "x-sump"}}},
        400,
        "header 'x-asya-route-override' must not name crew actor 'x-sump'",
    ),
    (
        "actor=analyze",
        {"headers": {"x-asya-route-override": {"analyze": "ghost"}}},
        400,
        "header 'x-asya-route-override' names undeclared actor 'ghost' "
        "(actors: analyze, chunk, digest, normalize, publish, request-review, split, summarize, summarize-chunk)",
    ),
    ("actor=analyze", {"payload": DEEP_257}, 400, "payload nesting exceeds 256 levels"),
    ("actor=analyze", {"payload": {"__ref__": "s3://b/k"}}, 400, "payload must not be a storage reference"),
    ("actor=analyze", {"headers": {"x-asya-flow": "f"}}, 400, "header 'x-asya-flow' is reserved"),
    (
        "actor=analyze",
        {"timeout": 0},
        400,
        "timeout must be an integer number of seconds between 1 and 604800",
    ),
    (
        "flow=text-pipeline",
        {"payload": {"txt": "x"}},
        400,
        "payload does not match input_schema: $: 'text' is a required property",
    ),
    (
        "flow=text-pipeline",
        {"payload": {"text": ""}},
        400,
        "payload does not match input_schema: $.text: '' should be non-empty",
    ),
]


def test_create_rejects_bad_requests_gw_create_1_to_6(gw: Gw) -> None:
    """The messages that go on with the fix (issue 20 point 6), the crew override (P-ROUTE-7) and the nesting cap
    (GW-CREATE-4) are R2; each keeps the spec's prefix."""
    for query, body, status, message in BAD_CREATES:
        response = gw.client.post(f"/api/v1/mesh/?{query}", json=body)
        assert (response.status_code, response.json()) == (status, {"error": message}), (query, body)
    assert gw.receive("analyze") == []
    assert gw.store.list_tasks()["messages"] == []


def test_body_parsing_errors_gw_gen_5(gw: Gw) -> None:
    bad = gw.client.post("/api/v1/mesh/?actor=analyze", content=b"{nope", headers={"content-type": "text/plain"})
    assert (bad.status_code, bad.json()) == (400, {"error": "invalid JSON body"})
    array = gw.client.post("/api/v1/mesh/?actor=analyze", content=b"[1]")
    assert (array.status_code, array.json()) == (400, {"error": "body must be a JSON object"})
    # parsed as JSON whatever the content type
    ok = gw.client.post(
        "/api/v1/mesh/?actor=analyze", content=b'{"payload": 1}', headers={"content-type": "text/plain"}
    )
    assert ok.status_code == 201
    big = gw.client.post("/api/v1/mesh/?actor=analyze", content=b" " * (5 * 1024 * 1024 + 1))
    assert (big.status_code, big.json()) == (413, {"error": "request body too large (limit 5 MiB)"})


def test_missing_queue_deletes_record_and_answers_404_gw_create_8(gw: Gw) -> None:
    sqs = gw.mesh.aws.sqs
    sqs.delete_queue(QueueUrl=gw.mesh.resources.queue_urls["split"])
    response = gw.client.post("/api/v1/mesh/?flow=sentences", json={"payload": {"text": "a"}})
    assert (response.status_code, response.json()) == (404, {"error": "actor not found: split"})
    items = gw.mesh.aws.dynamodb.scan(TableName=gw.mesh.resources.table)["Items"]
    assert items == []


def test_send_failure_marks_task_failed_gw_create_8(mesh: Any) -> None:
    # With a 1 KiB offload threshold (P-LARGE-1) a 10 KiB payload must travel as an S3 reference while the task
    # record still holds it inline (GW-DATA-6: 64 KiB); with the bucket gone that send cannot happen.
    manifest = mesh.manifest.model_copy(update={"storage": StorageConfig(offload_threshold_kb=1)})
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    app = create_app(GatewayConfig(), manifest=manifest, store=store, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    mesh.aws.s3.delete_bucket(Bucket=mesh.resources.bucket)
    with asgi_client(app) as client:
        response = client.post("/api/v1/mesh/?actor=analyze", json={"payload": "x" * (10 * 1024)})
    assert (response.status_code, response.json()) == (500, {"error": "failed to dispatch message"})
    [task] = store.list_tasks()["messages"]
    assert task["status"] == "failed"
    assert task["error"] == "dispatch failed: NoSuchBucket"
    url = mesh.resources.queue_urls["analyze"]
    assert "Messages" not in mesh.aws.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_p_large_2_a_large_payload_is_sent_as_a_reference_and_kept_whole_on_the_task(gw: Gw) -> None:
    payload = {"text": "x" * (1536 * 1024)}  # over SQS's 1 MiB: only a reference can carry it
    task_id = gw.create("actor=analyze", {"payload": payload})["id"]
    [sent] = gw.receive("analyze")
    ref = sent["payload"]["__ref__"]
    bucket = gw.mesh.resources.bucket
    assert ref.startswith(f"s3://{bucket}/payloads/{task_id}/0000-analyze-") and ref.endswith(".json")
    stored = gw.mesh.aws.s3.get_object(Bucket=bucket, Key=ref.removeprefix(f"s3://{bucket}/"))
    assert json.loads(stored["Body"].read()) == payload
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert view["status"] == "pending"
    # GW-DATA-6: the task keeps the input; at 1.5 MiB, under the 4 MiB limit, the view returns it inline
    assert view["payload"] == payload
    assert "payload_url" not in view


# ---------------------------------------------------------------- view, list, cancel


def test_view_unknown_id_is_404_gw_task(gw: Gw) -> None:
    response = gw.client.get("/api/v1/mesh/no-such-task")
    assert (response.status_code, response.json()) == (404, {"error": "not found"})


def test_view_applies_read_path_backstop_gw_back_3(gw: Gw) -> None:
    task_id = gw.create("actor=analyze", {"timeout": 5})["id"]
    gw.clock.advance(6)
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert view["status"] == "failed"
    assert view["error"] == "task timed out"
    assert view["data"]["status"] == "failed"


def test_list_newest_first_with_cursor_and_count_gw_list_1_3(gw: Gw) -> None:
    ids = []
    for _ in range(3):
        ids.append(gw.create("actor=analyze")["id"])
        gw.clock.advance(1)
    page = gw.client.get("/api/v1/mesh/?limit=2&count=true").json()
    assert [m["id"] for m in page["messages"]] == [ids[2], ids[1]]
    assert page["total"] == 3
    assert set(page["messages"][0]) >= {"id", "status", "flow", "actor", "created_at", "progress_percent"}
    rest = gw.client.get(f"/api/v1/mesh?limit=2&cursor={page['next_cursor']}").json()
    assert [m["id"] for m in rest["messages"]] == [ids[0]]
    assert rest["next_cursor"] is None
    assert rest["total"] is None


def test_list_rejects_bad_parameters_gw_list_1(gw: Gw) -> None:
    cases = [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("offset=-1", "offset"),
        ("status=done", "status"),
        ("flow=Bad!", "flow"),
        ("count=yes", "count"),
        ("cursor=abc&offset=1", "cursor"),
        ("cursor=%25%25", "cursor"),
    ]
    for query, parameter in cases:
        response = gw.client.get(f"/api/v1/mesh/?{query}")
        assert response.status_code == 400, query
        assert response.json()["error"].startswith(f"{parameter}: "), response.json()


def test_cancel_semantics_gw_cancel_1(gw: Gw) -> None:
    task_id = gw.create("actor=analyze")["id"]
    first = gw.client.delete(f"/api/v1/mesh/{task_id}")
    assert (first.status_code, first.content) == (204, b"")
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert view["status"] == "canceled"
    assert view["message"] == "Canceled by client"
    assert view["last_event_id"] == 2
    again = gw.client.delete(f"/api/v1/mesh/{task_id}")
    assert again.status_code == 204
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["last_event_id"] == 2
    missing = gw.client.delete("/api/v1/mesh/no-such-task")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})


# ---------------------------------------------------------------- producer events


def test_post_status_events_update_the_task_gw_evt_1_3(gw: Gw) -> None:
    task_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})["id"]
    url = f"/api/v1/mesh/{task_id}/events"
    running = {"prev": [], "curr": "normalize", "next": ["analyze", "summarize"]}
    response = gw.client.post(url, json={"type": "status", "status": "processing", "data": running})
    assert response.status_code == 204
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert (view["status"], view["step"], view["current_actor"]) == ("running", "processing", "normalize")
    assert view["progress_percent"] == 16.7
    stale = gw.client.post(url, json={"type": "status", "status": "processing", "data": running})
    assert stale.status_code == 204
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["last_event_id"] == view["last_event_id"]
    done = gw.client.post(
        url,
        json={"type": "status", "status": "succeeded", "data": {"result": {"ok": True}}},
        headers={"X-Asya-Envelope-ID": task_id},
    )
    assert (done.status_code, done.json()) == (400, {"error": "status 'succeeded' is written by the crew only"})
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["status"] == "running"  # GW-EVT-3 (R3)


def test_post_fly_event_is_logged_gw_evt_4(gw: Gw) -> None:
    task_id = gw.create("actor=analyze")["id"]
    response = gw.client.post(f"/api/v1/mesh/{task_id}/events", json={"type": "fly", "data": "partial"})
    assert response.status_code == 204
    snap = gw.store.snapshot(task_id, 1)
    assert snap is not None
    [event] = snap.fly
    assert (event["seq"], event["event"]) == (2, "fly")
    assert event["data"] == {"payload": "partial", "actor": None, "envelope_id": task_id}
    assert (snap.status, snap.last_seq) == ("pending", 2)


def test_post_event_rejects_malformed_bodies_gw_evt_5(gw: Gw) -> None:
    task_id = gw.create("actor=analyze")["id"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "nope"}, "unknown event type 'nope'"),
        (
            {"type": "status", "status": "paused", "data": {"pause_metadata": {}}},
            "status 'paused' is written by the crew only",
        ),
        ({"type": "status", "status": "processing", "data": []}, "data must be an object for a status event, got []"),
        (
            {"type": "status", "status": "running", "data": {"progress_percent": 101}},
            "data.progress_percent must be a number between 0 and 100, got 101",
        ),
    ]
    for body, message in cases:
        response = gw.client.post(f"/api/v1/mesh/{task_id}/events", json=body)
        assert (response.status_code, response.json()) == (400, {"error": message})
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["last_event_id"] == 1


def test_post_event_bad_status_and_unknown_task_gw_evt_5(gw: Gw) -> None:
    task_id = gw.create("actor=analyze")["id"]
    bad = gw.client.post(f"/api/v1/mesh/{task_id}/events", json={"type": "status", "status": "pending"})
    assert bad.status_code == 400
    assert bad.json()["error"].startswith('status: invalid value "pending"')
    for body in (
        {"type": "fly", "data": 1},
        {"type": "status", "status": "running", "data": {"curr": "analyze", "progress_percent": 5}},
    ):
        missing = gw.client.post("/api/v1/mesh/no-such-task/events", json=body)
        assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    big = gw.client.post(f"/api/v1/mesh/{task_id}/events", content=b" " * (1024 * 1024 + 1))
    assert (big.status_code, big.json()) == (413, {"error": "request body too large (limit 1 MiB)"})


def test_post_event_values_over_the_task_item_limits_are_400_and_change_nothing_gw_evt_5_gw_data_8(gw: Gw) -> None:
    """The values a status event puts on the task item are bounded (GW-DATA-8; the task item stays under 1 KB): a name
    or extras over their limit answer 400 naming the field and its size, and the task is untouched."""
    task_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})["id"]
    before = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"status": "running", "data": {"curr": "a" * 300}}, "data.curr: 300 characters, over the limit of 256"),
        (
            {"status": "retrying", "data": {"attempt": 2, "prev": ["n" * 40] * 200}},
            "data (prev, curr, next, message_size_kb, duration_ms, frames, attempt, delay_seconds): "
            "8622 bytes as JSON, over the limit of 384 bytes",
        ),
    ]
    for body, message in cases:
        response = gw.client.post(f"/api/v1/mesh/{task_id}/events", json={"type": "status", **body})
        assert response.status_code == 400, body
        assert response.json()["error"] == message
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json() == before
    assert gw.store.snapshot(task_id, 0).last_seq == 1  # type: ignore[union-attr]


def test_post_event_long_message_and_error_are_cut_with_an_ellipsis_gw_evt_3_gw_data_8(gw: Gw) -> None:
    """R2: ``message`` (128 bytes) and ``error`` (256 bytes) longer than their bound are cut on a character boundary
    with an ellipsis, never refused: a producer's status must land."""
    url = "/api/v1/mesh/{}/events"
    running_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})["id"]
    huge = "x" * 500_000
    assert (
        gw.client.post(
            url.format(running_id), json={"type": "status", "status": "running", "data": {"message": huge}}
        ).status_code
        == 204
    )
    assert gw.client.get(f"/api/v1/mesh/{running_id}").json()["message"] == "x" * 125 + "\u2026"
    # bytes, not characters: 42 euro signs and the ellipsis would be 129 bytes
    euros = {"type": "status", "status": "running", "data": {"message": "\u20ac" * 400, "curr": "normalize"}}
    assert gw.client.post(url.format(running_id), json=euros).status_code == 204
    assert gw.client.get(f"/api/v1/mesh/{running_id}").json()["message"] == "\u20ac" * 41 + "\u2026"


def test_post_event_at_the_limits_and_a_large_result_are_accepted_gw_evt_3_gw_data_6(gw: Gw) -> None:
    """Exactly at the limits is fine, and a large result is no task-item value: it goes to S3 (GW-DATA-6)."""
    task_id = gw.create("flow=text-pipeline", {"payload": {"text": "hi"}})["id"]
    url = f"/api/v1/mesh/{task_id}/events"
    running = {"message": "m" * 128, "curr": "a" * 256}
    assert gw.client.post(url, json={"type": "status", "status": "running", "data": running}).status_code == 204
    view = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert (view["message"], view["current_actor"]) == (running["message"], running["curr"])
    result = {"text": "r" * 900_000}
    assert gw.store.apply(task_id, StatusUpdate(status="succeeded", result=result)).accepted  # the crew's (GW-EVT-3 R3)
    final = gw.client.get(f"/api/v1/mesh/{task_id}").json()
    assert (final["status"], final["result"]) == ("succeeded", result)


# ---------------------------------------------------------------- general rules


def test_unknown_path_and_wrong_method_gw_gen_3(gw: Gw) -> None:
    missing = gw.client.get("/api/v2/other")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    wrong = gw.client.put("/api/v1/mesh/abc")
    assert (wrong.status_code, wrong.json()) == (405, {"error": "method not allowed"})
    assert {m.strip() for m in wrong.headers["allow"].split(",")} >= {"GET", "DELETE"}
    wrong_events = gw.client.delete("/api/v1/mesh/abc/events")
    assert wrong_events.status_code == 405
    assert "POST" in wrong_events.headers["allow"]


def test_request_id_on_every_response_gw_gen_4(gw: Gw, mesh: Any) -> None:
    """In Lambda the adapter's request context names the id; locally the same header is the client's and is never
    trusted (issue 18 defect 7)."""
    context = json.dumps({"requestId": "apigw-req-1", "stage": "prod"})
    in_lambda = create_app(GatewayConfig(in_lambda=True), manifest=mesh.manifest, store=gw.store, sqs=mesh.aws.sqs)
    with asgi_client(in_lambda) as client:
        tagged = client.get("/health", headers={"x-amzn-request-context": context})
    assert tagged.headers["x-request-id"] == "apigw-req-1"
    forged = gw.client.get("/health", headers={"x-amzn-request-context": context})
    assert forged.headers["x-request-id"] != "apigw-req-1"
    assert len(forged.headers["x-request-id"]) == 36
    local = gw.client.get("/api/v1/mesh/unknown")
    assert len(local.headers["x-request-id"]) == 36
    assert local.headers["x-request-id"] != gw.client.get("/health").headers["x-request-id"]


def test_unexpected_failure_is_500_internal_error_gw_gen_4(mesh: Any) -> None:
    store = TaskStore(table="asya-demo-missing", dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    app = create_app(GatewayConfig(), manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs)
    with asgi_client(app) as client:
        response = client.get("/api/v1/mesh/some-id")
    assert (response.status_code, response.json()) == (500, {"error": "internal error"})
    assert response.headers["x-request-id"]


def test_health_gw_ops_1(gw: Gw) -> None:
    response = gw.client.get("/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok", "version": "0.1.0"})
    assert response.headers["content-type"] == "application/json"


def test_mq_diagnostic_reports_queues_and_dlqs_gw_ops_3_4(gw: Gw) -> None:
    healthy = gw.client.post("/api/v1/system/mq-diagnostic").json()
    assert healthy["namespace"] == "demo"
    assert healthy["healthy"] is True
    assert [q["actor"] for q in healthy["queues"]] == [
        "normalize",
        "analyze",
        "summarize",
        "split",
        "chunk",
        "summarize-chunk",
        "digest",
        "request-review",
        "publish",
        "x-sink",
        "x-sump",
        "x-pause",
        "x-resume",
        "x-fanin-chunk",
        "x-fanin-flow-triage",
    ]
    gw.create("actor=analyze")
    sqs = gw.mesh.aws.sqs
    sqs.send_message(QueueUrl=gw.mesh.resources.dlq_urls["analyze"], MessageBody="{}")
    sqs.delete_queue(QueueUrl=gw.mesh.resources.queue_urls["split"])
    report = gw.client.post("/api/v1/system/mq-diagnostic", json={"actors": ["analyze", "split"]}).json()
    assert report["healthy"] is False
    analyze, split = report["queues"]
    assert analyze == {
        "actor": "analyze",
        "declared": True,
        "queue": "asya-demo-analyze",
        "exists": True,
        "depth": 1,
        "in_flight": 0,
        "delayed": 0,
        "oldest_age_seconds": None,
        "dlq": {"queue": "asya-demo-analyze-dlq", "exists": True, "depth": 1, "oldest_age_seconds": None},
    }
    assert (split["exists"], split["depth"], split["in_flight"]) == (False, None, None)
    # an undeclared name is reported (GW-OPS-5); only a name that cannot be an actor is refused
    [nope] = gw.client.post("/api/v1/system/mq-diagnostic", json={"actors": ["nope"]}).json()["queues"]
    assert (nope["declared"], nope["exists"]) == (False, False)
    bad = gw.client.post("/api/v1/system/mq-diagnostic", json={"actors": ["No Pe"]})
    assert (bad.status_code, bad.json()) == (
        400,
        {
            "error": "actors: 'No Pe' is not an actor name (actors: analyze, chunk, digest, normalize, publish, "
            "request-review, split, summarize, summarize-chunk, x-deadline, x-fanin-chunk, x-fanin-flow-triage, "
            "x-pause, x-resume, x-sink, x-sump)"
        },
    )


def test_mq_diagnostic_names_are_deduplicated_and_capped_gw_ops_3(gw: Gw) -> None:
    """R2 (issue 18 defect 4): 5,000 copies of one name ran past 60 s, one check per copy."""
    calls: list[str] = []
    gw.mesh.aws.sqs.meta.events.register(
        "before-parameter-build.sqs.GetQueueUrl", lambda **kw: calls.append(kw["params"]["QueueName"])
    )
    report = gw.client.post("/api/v1/system/mq-diagnostic", json={"actors": ["analyze", "split", "analyze"] * 66})
    assert report.status_code == 200
    assert [q["actor"] for q in report.json()["queues"]] == ["analyze", "split"]
    assert sorted(calls) == ["asya-demo-analyze", "asya-demo-analyze-dlq", "asya-demo-split", "asya-demo-split-dlq"]
    many = gw.client.post("/api/v1/system/mq-diagnostic", json={"actors": ["analyze"] * 5000})
    assert (many.status_code, many.json()) == (400, {"error": "actors: at most 200 names, got 5000"})
    assert len(calls) == 4, "a refused request checks no queue"


def test_gw_list_6_an_unknown_flow_filter_is_400_naming_the_flows(gw: Gw) -> None:
    """GW-LIST-6: a flow the manifest does not declare has no tasks to find: answered at once, without a store read."""
    reads: list[str] = []
    gw.mesh.aws.dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: reads.append(model.name))
    response = gw.client.get("/api/v1/mesh/?flow=nosuch")
    assert response.status_code == 400, response.text
    assert response.json()["error"] == (
        "flow: unknown flow 'nosuch' (flows: documents, reviewed-text, sentences, text-pipeline, triage)"
    )
    assert reads == []
    assert gw.client.get("/api/v1/mesh/?flow=sentences").status_code == 200
