"""Edge cases of the gateway's REST contract found in review, against moto over real HTTP: bodies the JSON parser
cannot represent (GW-GEN-5), list cursors that belong to another listing or were forged (GW-LIST-1), and task ids
too long to be a DynamoDB key (GW-GEN-7)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import httpx
import pytest

from asya.store import StatusUpdate, TaskStore
from asya_gateway import GatewayConfig, create_app
from tests.asgi import asgi_client

pytestmark = pytest.mark.functional

REPORTER_KEY = "reporter-key"

NOW = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
INVALID_JSON = {"error": "invalid JSON body"}


@dataclass
class Gw:
    client: httpx.Client
    store: TaskStore
    mesh: Any

    def create(self, query: str, body: dict[str, Any] | None = None) -> str:
        response = self.client.post(f"/api/v1/mesh/?{query}", json=body or {})
        assert response.status_code == 201, response.text
        task_id: str = response.json()["id"]
        return task_id

    def table_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.mesh.aws.dynamodb.scan(TableName=self.mesh.resources.table)["Items"]
        return items


@pytest.fixture
def gw(mesh: Any) -> Iterator[Gw]:
    store = TaskStore(
        table=mesh.resources.table,
        bucket=mesh.resources.bucket,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=lambda: NOW,
    )
    config = GatewayConfig(reporter_keys=(REPORTER_KEY,))
    app = create_app(config, manifest=mesh.manifest, store=store, sqs=mesh.aws.sqs, clock=lambda: NOW)
    # the producer route takes the reporter key (GW-EVT-1 R3); the other routes ignore it (auth mode none)
    with asgi_client(app, headers={"X-Asya-Reporter-Key": REPORTER_KEY}) as client:
        yield Gw(client=client, store=store, mesh=mesh)


# ---------------------------------------------------------------- GW-OPS-2: the OpenAPI document


def test_gw_ops_2_openapi_document_is_valid_and_describes_every_route(gw: Gw) -> None:
    from openapi_spec_validator import validate
    from starlette.routing import Route

    from asya_gateway.app import create_app

    response = gw.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)  # raises on anything that is not OpenAPI 3.1
    assert document["openapi"] == "3.1.0"
    served = {
        (route.path.rstrip("/") or "/", method.lower())
        for route in create_app(GatewayConfig(), manifest=gw.mesh.manifest, store=gw.store).routes
        if isinstance(route, Route)
        for method in (route.methods or ()) - {"HEAD"}
    }
    described = {
        (path.rstrip("/") or "/", method)
        for path, item in document["paths"].items()
        for method in item
        if method != "parameters"
    }
    assert described == served
    create = document["paths"]["/api/v1/mesh/"]["post"]
    # a name, or the empty value that counts as absent
    flow_schema = next(p for p in create["parameters"] if p["name"] == "flow")["schema"]
    assert flow_schema["anyOf"][1] == {"const": ""}
    assert flow_schema["anyOf"][0]["enum"] == sorted(gw.mesh.manifest.flows)
    actors = next(p for p in create["parameters"] if p["name"] == "actor")["schema"]["anyOf"][0]["enum"]
    assert actors == sorted(gw.mesh.manifest.actors)  # user actors only: crew is refused (GW-CREATE-2)
    diagnostic = document["paths"]["/api/v1/system/mq-diagnostic"]["post"]["requestBody"]["content"]
    queues = diagnostic["application/json"]["schema"]["properties"]["actors"]["items"]["anyOf"][0]["enum"]
    assert queues == [  # what the route accepts: every actor of the manifest and every crew name (GW-OPS-3)
        "analyze",
        "chunk",
        "digest",
        "normalize",
        "publish",
        "request-review",
        "split",
        "summarize",
        "summarize-chunk",
        "x-deadline",
        "x-fanin-chunk",
        "x-fanin-flow-triage",
        "x-pause",
        "x-resume",
        "x-sink",
        "x-sump",
    ]
    assert document["paths"]["/health"]["get"]["security"] == []
    assert "sigv4" in document["components"]["securitySchemes"]  # the example's gateway.auth.mode: iam


# ---------------------------------------------------------------- GW-GEN-5: bodies JSON cannot carry


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_nesting_beyond_the_parser_limit_is_invalid_json_not_500_gw_gen_5(gw: Gw) -> None:
    """GW-GEN-5: a body the parser cannot read answers 400 ``invalid JSON body``, on create and producer events."""
    deep = _nested(100_000)
    create = gw.client.post("/api/v1/mesh/?actor=analyze", content=b'{"payload":' + deep + b"}")
    assert (create.status_code, create.json()) == (400, INVALID_JSON)
    assert gw.table_items() == []
    task_id = gw.create("actor=analyze")
    event = gw.client.post(f"/api/v1/mesh/{task_id}/events", content=b'{"type":"fly","data":' + deep + b"}")
    assert (event.status_code, event.json()) == (400, INVALID_JSON)
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["last_event_id"] == 1


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1.5e999"])
def test_number_beyond_float_range_is_invalid_json_gw_gen_5(gw: Gw, number: bytes) -> None:
    """GW-GEN-5: ``1e400`` parses to infinity, which no envelope or record can hold (like the ``Infinity`` token):
    400 ``invalid JSON body`` instead of a 500 when the envelope is encoded."""
    create = gw.client.post("/api/v1/mesh/?actor=analyze", content=b'{"payload": {"x": ' + number + b"}}")
    assert (create.status_code, create.json()) == (400, INVALID_JSON)
    assert gw.table_items() == []
    task_id = gw.create("actor=analyze")
    body = b'{"type": "status", "status": "running", "data": {"progress_percent": ' + number + b"}}"
    event = gw.client.post(f"/api/v1/mesh/{task_id}/events", content=body)
    assert (event.status_code, event.json()) == (400, INVALID_JSON)


@pytest.mark.parametrize(
    "body",
    [b'{"payload": "\\ud800"}', b'{"headers": {"a": "\\udfff"}}', b'{"headers": {"\\ud800": "x"}}'],
)
def test_a_lone_surrogate_is_invalid_json_not_500_gw_gen_5(gw: Gw, body: bytes) -> None:
    """``"\\ud800"`` parses, but no UTF-8 text can hold it: 400 ``invalid JSON body``, nothing stored."""
    create = gw.client.post("/api/v1/mesh/?actor=analyze", content=body)
    assert (create.status_code, create.json()) == (400, INVALID_JSON)
    assert gw.table_items() == []
    task_id = gw.create("actor=analyze")
    event = gw.client.post(f"/api/v1/mesh/{task_id}/events", content=b'{"type": "fly", "data": "\\ud800"}')
    assert (event.status_code, event.json()) == (400, INVALID_JSON)


def test_a_surrogate_pair_is_a_character_and_parses_gw_gen_5(gw: Gw) -> None:
    task_id = gw.create("actor=analyze", {"payload": {"emoji": "\U0001f600"}})
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["payload"] == {"emoji": "\U0001f600"}


def test_numbers_too_long_for_python_are_400_not_500_gw_list_1_gw_sse_1(gw: Gw) -> None:
    digits = "1" * 5000
    listing = gw.client.get(f"/api/v1/mesh/?limit={digits}")
    assert listing.status_code == 400 and listing.json()["error"].startswith("limit: invalid value '1111")
    task_id = gw.create("actor=analyze")
    stream = gw.client.get(f"/api/v1/mesh/{task_id}/events", headers={"Last-Event-ID": digits})
    assert stream.status_code == 400 and stream.json()["error"].startswith("Last-Event-ID must be a non-negative")


def test_finite_fractions_still_parse_gw_gen_5(gw: Gw) -> None:
    task_id = gw.create("actor=analyze", {"payload": {"x": 1.5e300, "y": -0.25}})
    assert gw.client.get(f"/api/v1/mesh/{task_id}").json()["payload"] == {"x": 1.5e300, "y": -0.25}


# ---------------------------------------------------------------- GW-LIST-1: cursors of another listing


def _cursor(body: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(body).encode("utf-8")).decode("ascii")


def test_cursor_of_another_listing_answers_400_naming_cursor_gw_list_1(gw: Gw) -> None:
    """GW-LIST-1: a cursor is only valid for the index partition of the listing that produced it. R2: ``failed`` and
    ``canceled`` list from the sparse ``by_outcome`` index, every other listing from ``by_created``; a cursor of one
    reused with the other, or a ``failed`` cursor with ``canceled``, answers 400 naming ``cursor`` (it would reach
    DynamoDB as an ``ExclusiveStartKey`` of the wrong index: a 500)."""
    for _ in range(2):
        task_id = gw.create("actor=analyze")
        assert gw.store.report_final(task_id, status="failed", error="boom")
    failed = gw.client.get("/api/v1/mesh/?status=failed&limit=1").json()
    cursor = failed["next_cursor"]
    assert cursor is not None
    assert len(gw.client.get(f"/api/v1/mesh/?status=failed&limit=1&cursor={cursor}").json()["messages"]) == 1
    for query in (f"cursor={cursor}", f"status=pending&cursor={cursor}", f"status=canceled&cursor={cursor}"):
        response = gw.client.get(f"/api/v1/mesh/?{query}")
        assert response.status_code == 400, (query, response.text)
        assert response.json()["error"].startswith("cursor: invalid cursor "), response.json()
    unfiltered = gw.client.get("/api/v1/mesh/?limit=1").json()["next_cursor"]
    response = gw.client.get(f"/api/v1/mesh/?status=failed&cursor={unfiltered}")
    assert response.status_code == 400
    assert response.json()["error"].startswith("cursor: invalid cursor ")
    # pending, running and unfiltered listings share by_created: its cursors carry over, and the filter still applies
    carried = gw.client.get(f"/api/v1/mesh/?status=pending&cursor={unfiltered}")
    assert (carried.status_code, carried.json()["messages"]) == (200, [])


_LAST: Final = "2026-03-01T10:00:00.000Z#x"


@pytest.mark.parametrize(
    "body",
    [
        {},
        [],
        "by_created",
        {"foo": "bar"},
        {"scope": "by_created"},
        {"last": _LAST},
        {"scope": "by_created", "last": _LAST, "z": ""},
        {"scope": 1, "last": _LAST},
        {"scope": "by_created", "last": None},
        # the scope of another listing, or of none
        {"scope": "by_outcome#failed", "last": _LAST},
        {"scope": "by_created#1", "last": _LAST},
        {"scope": "TASKS#2026-03-01", "last": _LAST},
        # positions no index entry can have: no id, an id or sort key over DynamoDB's key sizes (2048-byte partition,
        # 1024-byte sort key: a ValidationException on AWS), a created_at not in the task-record form
        {"scope": "by_created", "last": "2026-03-01T10:00:00.000Z"},
        {"scope": "by_created", "last": "2026-03-01T10:00:00.000Z#"},
        {"scope": "by_created", "last": "2026-03-01T10:00:00.000Z#" + "x" * 3000},
        {"scope": "by_created", "last": "2026-03-01T10:00:00.000Z#" + "x" * 1100},
        {"scope": "by_created", "last": "2026-03-01 and more#x"},
        {"scope": "by_created", "last": "2026-03-01T10:00:00Z#x"},
        {"scope": "by_created", "last": "#x"},
        # days outside the listing window (today, 2026-03-01, back 30 days)
        {"scope": "by_created", "last": "2026-03-02T10:00:00.000Z#x"},
        {"scope": "by_created", "last": "2026-01-29T10:00:00.000Z#x"},
    ],
)
def test_forged_cursor_answers_400_not_500_gw_list_1(gw: Gw, body: object) -> None:
    """GW-LIST-1: a cursor that is not this listing's scope and a position an index entry of the window can have is
    checked before its position reaches DynamoDB as a key condition value."""
    gw.create("actor=analyze")
    response = gw.client.get(f"/api/v1/mesh/?cursor={_cursor(body)}")
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("cursor: invalid cursor ")


def test_a_well_formed_cursor_of_the_window_is_accepted_gw_list_1(gw: Gw) -> None:
    """The other side of the forged cases: a position no task has, on the window's oldest day, is a valid cursor (a
    cursor is a position in the order, not an entry that must still exist)."""
    task_id = gw.create("actor=analyze")
    for last, ids in (("2026-01-30T00:00:00.000Z#x", []), ("2026-03-01T23:59:59.999Z#x", [task_id])):
        response = gw.client.get(f"/api/v1/mesh/?cursor={_cursor({'scope': 'by_created', 'last': last})}")
        assert response.status_code == 200, response.text
        assert [m["id"] for m in response.json()["messages"]] == ids


# ---------------------------------------------------------------- GW-GEN-7: ids no task can have


def test_id_too_long_for_a_key_is_404_without_a_store_call_gw_gen_7(gw: Gw) -> None:
    """GW-GEN-7: ``{id}`` may be any string, so an id longer than a DynamoDB partition key allows (2048 bytes, with
    the ``TASK#`` prefix) is simply unknown: 404 on every task route. DynamoDB rejects such a key with a
    ValidationException (a 500); moto does not, so the test watches the requests the client sends."""
    sent: list[str] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        sent.append(json.dumps(params))

    events = gw.mesh.aws.dynamodb.meta.events
    events.register("provide-client-params.dynamodb.*", watch)
    try:
        long_id = "é" * 1100
        routes = [
            ("GET", f"/api/v1/mesh/{long_id}", None),
            ("DELETE", f"/api/v1/mesh/{long_id}", None),
            ("GET", f"/api/v1/mesh/{long_id}/events", None),
            ("POST", f"/api/v1/mesh/{long_id}/events", {"type": "fly", "data": 1}),
            ("POST", f"/api/v1/mesh/{long_id}/events", {"type": "status", "status": "running"}),
        ]
        for method, url, body in routes:
            response = gw.client.request(method, url, json=body)
            assert (response.status_code, response.json()) == (404, {"error": "not found"}), (method, url)
    finally:
        events.unregister("provide-client-params.dynamodb.*", watch)
    assert sent == []
    short = gw.client.get("/api/v1/mesh/" + "a" * 2043)
    assert (short.status_code, short.json()) == (404, {"error": "not found"})


# ---------------------------------------------------------------- GW-SSE-2: one data line for every client


def test_sse_data_stays_one_line_for_splitlines_clients_gw_sse_2_gw_sse_11(gw: Gw) -> None:
    """GW-SSE-2: each event has one ``data:`` line. JSON may carry U+2028, U+2029 and U+0085 raw inside strings;
    the SSE grammar does not break lines there, but ``str.splitlines`` does, and so do clients built on it (httpx's
    ``iter_lines``, used here). The stream escapes them, which leaves the JSON value unchanged."""
    task_id = gw.create("actor=analyze")
    value = "line\u2028sep\u2029para\x85nel"
    fly = gw.client.post(f"/api/v1/mesh/{task_id}/events", json={"type": "fly", "data": {"text": value}})
    assert fly.status_code == 204
    assert gw.store.apply(task_id, StatusUpdate(status="succeeded", result=value)).accepted  # x-sink's (GW-EVT-3 R3)
    with gw.client.stream("GET", f"/api/v1/mesh/{task_id}/events") as response:
        assert response.status_code == 200
        lines = list(response.iter_lines())
    data = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    assert [line for line in lines if line and not line.startswith(("data: ", "id: ", "event: ", "retry: "))] == []
    assert data[0]["status"] == "succeeded"
    assert data[0]["result"] == value
    assert data[1] == {"payload": {"text": value}, "actor": None, "envelope_id": task_id}
    assert data[2]["status"] == "succeeded" and data[2]["result"] == value  # the terminal event, id L (R2)
    assert len(data) == 3
