"""Security as tests (issue 18 "Build" 3), over real HTTP against moto:

- every route but the public ones (GW-AUTH-2) needs credentials when ``api_key`` auth is on, including unknown
  paths, every method and the trailing-slash forms (GW-AUTH-1, GW-AUTH-7). ``iam`` is enforced by API Gateway:
  ``tests/infra/test_example_stack.py::test_gw_auth_3_iam_on_every_non_public_route`` checks the template; ``jwt`` is
  refused at start (``test_gateway_auth.py``), so the gateway fails closed; ``none`` checks nothing by definition;
- oversize bodies answer 413 (GW-GEN-5), declared or chunked, on every route that reads a body;
- request ids and trace headers cannot be forged into logs: a client's ``X-Request-Id`` or
  ``x-amzn-request-context`` never becomes the logged id locally (issue 18 defect 7), and an invalid ``traceparent``
  or ``tracestate`` reaches neither the envelope nor any log line (GW-CREATE-5).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from asya.manifest import GatewayAuth
from asya.manifest import GatewayConfig as ManifestGateway
from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app
from asya_gateway.auth import PUBLIC_PATHS, is_producer_route
from asya_gateway.logs import JsonFormatter
from asya_gateway.webconsole import is_console_path
from tests.asgi import asgi_client
from tests.waiting import wait_for

pytestmark = pytest.mark.functional

KEY = "sec-key-1"
REPORTER_KEY = "reporter-key"
MIB = 1024 * 1024


@pytest.fixture
def app(mesh: Any) -> Any:
    auth = GatewayAuth(mode="api_key", api_key_secret="asya/demo/api-keys")
    manifest = mesh.manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    config = GatewayConfig(api_keys=(KEY,), reporter_keys=(REPORTER_KEY,))
    return create_app(config, manifest=manifest, store=store, sqs=mesh.aws.sqs, s3=mesh.aws.s3)


@pytest.fixture
def client(app: Any) -> Iterator[httpx.Client]:
    with asgi_client(app, timeout=30) as http:
        yield http


def _served(app: Any) -> list[tuple[str, str]]:
    return sorted(
        (method, route.path.replace("{task_id}", "some-task"))
        for route in app.routes
        if isinstance(route, Route)
        for method in (route.methods or ()) - {"HEAD"}
    )


def test_gw_auth_1_every_non_public_route_needs_credentials_in_api_key_mode(app: Any, client: httpx.Client) -> None:
    routes = _served(app)
    # the console's static files hold no data and are public like /health (every API call they make is guarded)
    guarded = [(m, p) for m, p in routes if p not in PUBLIC_PATHS and not is_console_path(p)]
    assert len(guarded) >= 9, "the app serves the create, list, view, cancel, events and diagnostic routes"
    extra = [("GET", "/nowhere"), ("PUT", "/api/v1/mesh/x"), ("POST", "/mcp"), ("POST", "/a2a/")]
    for method, path in guarded + extra:
        anonymous = client.request(method, path, json={})
        assert anonymous.status_code == 401, (method, path, anonymous.text)
        wrong = client.request(method, path, json={}, headers={"X-API-Key": "not-the-key"})
        assert wrong.status_code == 401, (method, path)
        assert wrong.headers["www-authenticate"] == 'Bearer realm="asya-gateway"'
        if is_producer_route(method, path):  # a reporter's credential, never a client's (GW-EVT-1 R3)
            assert (anonymous.json(), wrong.json()) == (
                {"error": "reporter credential required: send X-Asya-Reporter-Key"},
                {"error": "reporter credential required: send X-Asya-Reporter-Key"},
            )
            assert client.request(method, path, json={}, headers={"X-API-Key": KEY}).status_code == 401
        elif path.startswith("/api/"):
            assert (anonymous.json(), wrong.json()) == (
                {"error": "authentication required"},
                {"error": "invalid credentials"},
            )
    for method, path in routes:
        if path in PUBLIC_PATHS:
            assert client.request(method, path).status_code == 200, path
        elif is_console_path(path):
            assert client.request(method, path).status_code in (200, 307), path


@pytest.mark.parametrize(
    ("path", "limit"),
    [
        ("/api/v1/mesh/?actor=analyze", 5),
        ("/api/v1/mesh?flow=text-pipeline", 5),
        ("/api/v1/mesh/some-task/events", 1),
        ("/api/v1/system/mq-diagnostic", 5),
    ],
)
def test_gw_gen_5_oversize_bodies_answer_413(client: httpx.Client, path: str, limit: int) -> None:
    expected = (413, {"error": f"request body too large (limit {limit} MiB)"})
    keys = {"X-API-Key": KEY, "X-Asya-Reporter-Key": REPORTER_KEY}
    declared = client.post(path, content=b" " * (limit * MIB + 1), headers=keys)
    assert (declared.status_code, declared.json()) == expected

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is enforced while reading
        for _ in range(limit * 4 + 1):
            yield b" " * (256 * 1024)

    chunked = client.post(path, content=chunks(), headers=keys)
    assert (chunked.status_code, chunked.json()) == expected


def _log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = JsonFormatter()
    return [formatter.format(record) for record in caplog.records]


def test_request_ids_cannot_be_forged_into_logs_gw_gen_4(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="asya_gateway")
    caplog.clear()
    forged = "forged-id-0001"
    context = json.dumps({"requestId": forged})
    response = client.get(
        "/api/v1/mesh/some-task",
        headers={"X-API-Key": KEY, "X-Request-Id": forged, "x-amzn-request-context": context},
    )
    assert response.status_code == 404
    request_id = response.headers["x-request-id"]
    assert str(uuid.UUID(request_id, version=4)) == request_id
    # the server thread writes its access line after the response left: wait for it rather than race it
    [access] = wait_for(
        lambda: [r for r in caplog.records if r.name == "asya_gateway.access"], "the access log line", limit=60
    )
    assert access.__dict__["request_id"] == request_id
    assert not any(forged in line for line in _log_lines(caplog))


@pytest.mark.parametrize(
    ("traceparent", "tracestate"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "ok=1,forged=" + "z" * 20_000),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "forged=\x7fdel"),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-forged" + "z" * 20_000, "k=v"),
        ("forged-parent", "forged=1"),
    ],
    ids=["20kb-state", "control-state", "20kb-parent", "junk"],
)
def test_trace_headers_cannot_be_forged_into_the_envelope_or_logs_gw_create_5(
    client: httpx.Client, mesh: Any, caplog: pytest.LogCaptureFixture, traceparent: str, tracestate: str
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    for via_body in (False, True):
        if via_body:
            response = client.post(
                "/api/v1/mesh/?actor=analyze",
                json={"headers": {"traceparent": traceparent, "tracestate": tracestate}},
                headers={"X-API-Key": KEY},
            )
        else:
            response = client.post(
                "/api/v1/mesh/?actor=analyze",
                json={},
                headers={"X-API-Key": KEY, "traceparent": traceparent, "tracestate": tracestate},
            )
            if len(traceparent) + len(tracestate) > 10 * 1024:
                assert response.status_code == 431, "over the head's 10 KiB, as API Gateway (GW-GEN-10)"
                continue
        if via_body and len(traceparent) + len(tracestate) > 16 * 1024:
            assert response.status_code == 400, "over the 16 KiB header cap: refused, nothing sent"
            assert response.json()["error"].endswith("over the limit of 16 KiB")
            continue
        assert response.status_code == 201, response.text
        [message] = mesh.aws.sqs.receive_message(QueueUrl=mesh.resources.queue_urls["analyze"])["Messages"]
        mesh.aws.sqs.delete_message(
            QueueUrl=mesh.resources.queue_urls["analyze"], ReceiptHandle=message["ReceiptHandle"]
        )
        assert "forged" not in message["Body"]
        headers = json.loads(message["Body"])["headers"]
        assert len(headers.get("tracestate", "")) <= 512
        assert len(headers["traceparent"]) <= 512
    assert not any("forged" in line for line in _log_lines(caplog))


@pytest.mark.parametrize("size", [10_241 - len("Authorization: Bearer "), 200_000, 900_000])
def test_gw_gen_10_headers_over_10_kib_answer_431(client: httpx.Client, size: int) -> None:
    """GW-GEN-10: the request line and headers together are at most 10 KiB, as API Gateway enforces: over it the answer
    is 431 naming the size, never a connection reset, whatever the header (here a bearer token)."""
    response = client.get("/api/v1/mesh/", headers={"Authorization": "Bearer " + "a" * size})
    assert response.status_code == 431, response.text
    assert response.json()["error"].startswith("request headers are ")
    assert response.json()["error"].endswith("bytes, over the limit of 10240 (API Gateway's)")
    assert response.headers["x-request-id"]
    assert client.get("/api/v1/mesh/", headers={"X-API-Key": KEY, "x-pad": "p" * 8000}).status_code == 200
