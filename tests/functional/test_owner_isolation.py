"""Owner isolation route by route (GW-EDGE-7, GW-EDGE-8), over real HTTP against moto, under ``jwt`` with
``owner_only``: alice owns a task, bob is another subject.

The test walks what the app serves, not a list written here: every route of ``app.routes`` (the local dev routes
included) must be an operation of the OpenAPI document the app serves, or a declared dev route, and every operation
must declare its kind (``x-asya-owner``). Each kind is then checked with bob's token: a ``task`` operation answers him
as for an unknown id, ``tasks`` the same, the listing shows him none of alice's tasks, ``mesh`` and ``public`` answers
never name her task, a reporter route refuses his token. The JSON-RPC endpoints are walked method by method: every
A2A method (both name sets) and every MCP method must be declared, and each task method answers bob as for an unknown
task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route

from asya.manifest import GatewayAuth, Manifest
from asya.manifest import GatewayConfig as ManifestGateway
from asya_gateway import GatewayConfig, create_app
from asya_gateway.a2a import v1
from asya_gateway.ownership import A2A_METHOD_OWNERS, KINDS, MCP_METHOD_OWNERS, OPERATION_OWNERS, OWNER_EXTENSION
from asya_local.devroutes import DEV_ROUTE_OWNERS, install_dev_routes
from tests.functional.test_gateway_jwt import AUDIENCE, ISSUER, Issuer, issuer  # noqa: F401 (fixture)

pytestmark = pytest.mark.functional

FLOW = "sentences"  # records a run history, so the history route answers its owner 200
#: Bodies for the operations that need one to get past validation to the owner check.
_BODIES: dict[tuple[str, str], Any] = {
    ("post", "/api/v1/mesh/{task_id}/resume"): {"input": {"ok": True}},
    ("post", "/api/v1/mesh/{task_id}/signal"): {"event": "approved", "data": {"ok": True}},
    ("post", "/api/v1/mesh/{task_id}/retry"): {},
    ("post", "/api/v1/mesh/{task_id}/events"): {"type": "fly", "data": 1},
    ("post", "/api/v1/system/mq-diagnostic"): {},
    ("post", "/api/v1/system/dlq/{actor}/redrive"): {"limit": 1},
    ("post", "/api/v1/mesh/"): {"payload": {"text": "bob's"}},
}


@dataclass
class Gateway:
    app: Any
    client: httpx.Client
    idp: Issuer

    def auth(self, sub: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.idp.token(self.idp.rsa, 'RS256', sub=sub)}"}

    def create(self, sub: str) -> str:
        body = {"payload": {"text": "x"}}
        created = self.client.post(f"/api/v1/mesh/?flow={FLOW}", json=body, headers=self.auth(sub))
        assert created.status_code == 201, created.text
        return str(created.json()["id"])


@pytest.fixture
def gateway(mesh: Any, serve_asgi: Callable[[Any], str], issuer: tuple[Issuer, str]) -> Iterator[Gateway]:  # noqa: F811
    idp, jwks_url = issuer
    auth = GatewayAuth(mode="jwt", jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE, owner_only=True)
    manifest: Manifest = mesh.manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})
    app = create_app(GatewayConfig(), manifest=manifest, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    install_dev_routes(app, moto_problem=lambda: None)
    with httpx.Client(base_url=serve_asgi(app), timeout=30) as client:
        yield Gateway(app=app, client=client, idp=idp)


def _app_operations(app: Any) -> list[tuple[str, str]]:
    """``(method, path)`` of every route the app serves, aliases folded onto the document's spelling."""
    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, Mount):
            found.add(("get", route.path.rstrip("/") or "/"))
            continue
        assert isinstance(route, Route), route
        path = {"/api/v1/mesh": "/api/v1/mesh/", "/a2a": "/a2a/"}.get(route.path, route.path)
        found.update((method.lower(), path) for method in (route.methods or ()) if method != "HEAD")
    return sorted(found)


def _declared(gateway: Gateway) -> dict[tuple[str, str], str]:
    document = gateway.client.get("/openapi.json").json()
    kinds: dict[tuple[str, str], str] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                kinds[(method, path)] = operation.get(OWNER_EXTENSION, "undeclared")
    kinds.update({(method, path): kind for (path, method), kind in DEV_ROUTE_OWNERS.items()})
    return kinds


def test_gw_edge_8_every_route_the_app_serves_is_declared_in_the_openapi_document(gateway: Gateway) -> None:
    declared = _declared(gateway)
    served = _app_operations(gateway.app)
    assert [op for op in served if op not in declared] == [], "routes neither owner-checked nor declared public"
    assert {kind for kind in declared.values()} <= KINDS, declared
    assert [op for op in declared if op not in served] == [], "the document describes routes the app does not serve"


def _url(path: str, task_id: str) -> str:
    url = path.replace("{task_id}", task_id).replace("{actor}", "analyze")
    return url + f"?ids={task_id}" if path == "/api/v1/mesh/events" else url


def _answer(gateway: Gateway, method: str, path: str, task_id: str, headers: dict[str, str]) -> tuple[int, str]:
    """Status and the first bytes of the answer (streams are read only that far)."""
    body = _BODIES.get((method, path))
    with gateway.client.stream(method.upper(), _url(path, task_id), json=body, headers=headers) as response:
        first = next(response.iter_text(), "") if response.status_code == 200 else response.read().decode()
        return response.status_code, first


def _operations(kind: str) -> list[tuple[str, str]]:
    ops = [(method, path) for (path, method), k in OPERATION_OWNERS.items() if k == kind]
    return ops + [(method, path) for (path, method), k in DEV_ROUTE_OWNERS.items() if k == kind]


_TASK_OPERATIONS = _operations("task") + _operations("tasks")


@pytest.mark.parametrize(("method", "path"), _TASK_OPERATIONS, ids=[f"{m} {p}" for m, p in _TASK_OPERATIONS])
def test_gw_edge_8_a_task_route_answers_another_subject_as_for_an_unknown_id(
    gateway: Gateway, method: str, path: str
) -> None:
    alice, bob = gateway.auth("alice"), gateway.auth("bob")
    task_id = gateway.create("alice")
    unknown = _answer(gateway, method, path, "no-such-task", alice)
    assert unknown[0] == 404, unknown
    assert _answer(gateway, method, path, task_id, bob) == unknown
    assert _answer(gateway, method, path, task_id, alice)[0] != 404


def test_gw_edge_8_listing_create_mesh_public_and_reporter_routes_never_show_another_subjects_task(
    gateway: Gateway,
) -> None:
    alice, bob = gateway.auth("alice"), gateway.auth("bob")
    task_id = gateway.create("alice")
    for method, path in _operations("listing") + _operations("mesh") + _operations("public") + _operations("create"):
        status, text = _answer(gateway, method, path, task_id, bob)
        assert status < 500 and task_id not in text, (method, path, status, text[:200])
    bobs = gateway.create("bob")
    listed = {t["id"] for t in gateway.client.get("/api/v1/mesh/", headers=bob).json()["messages"]}
    assert task_id not in listed and bobs in listed
    assert gateway.client.get(f"/api/v1/mesh/{bobs}", headers=alice).status_code == 404
    for method, path in _operations("reporter"):
        assert _answer(gateway, method, path, task_id, bob)[0] == 401, "a client's token is not a reporter's"


def _a2a(method: str, task_id: str) -> dict[str, Any]:
    params: dict[str, Any] = {"id": task_id}
    if method in ("message/send", "message/stream", "SendMessage", "SendStreamingMessage"):
        text = {"kind": "text", "text": "more"}
        message = {"role": "user", "parts": [text], "messageId": "m-1", "taskId": task_id}
        params = {"message": message, "configuration": {"blocking": False}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def test_gw_edge_8_every_a2a_method_is_declared_and_a_task_method_answers_another_subject_task_not_found(
    gateway: Gateway,
) -> None:
    alice, bob = gateway.auth("alice"), gateway.auth("bob")
    task_id = gateway.create("alice")
    names = {**{name: legacy for name, legacy in v1.METHODS.items()}, **{m: m for m in v1.METHODS.values()}}
    assert sorted({legacy for legacy in names.values()} - set(A2A_METHOD_OWNERS)) == []
    for name, legacy in names.items():
        if A2A_METHOD_OWNERS[legacy] != "task":
            continue
        headers = {"Accept": "application/json, text/event-stream"}
        with gateway.client.stream("POST", "/a2a/", json=_a2a(name, task_id), headers={**headers, **bob}) as r:
            first = next(r.iter_text(), "").replace(" ", "")
        assert '"code":-32001' in first, (name, first[:300])
        with gateway.client.stream("POST", "/a2a/", json=_a2a(name, task_id), headers={**headers, **alice}) as r:
            mine = next(r.iter_text(), "").replace(" ", "")
        assert '"code":-32001' not in mine, (name, mine[:300])
    unknown = gateway.client.post("/a2a/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/list"}, headers=bob)
    assert unknown.json()["error"]["code"] == -32601


def test_gw_edge_8_every_mcp_method_is_declared_and_another_subject_cannot_use_a_session(gateway: Gateway) -> None:
    """Methods outside the declaration answer -32601; a session is its opener's: bob's requests naming alice's session
    id are answered as for an unknown session (404), so he can neither cancel her calls nor read her session."""
    alice, bob = gateway.auth("alice"), gateway.auth("bob")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    session = gateway.client.post("/mcp", json=init, headers=alice).headers["mcp-session-id"]
    for method in MCP_METHOD_OWNERS:
        assert MCP_METHOD_OWNERS[method] in KINDS
    unknown = {"jsonrpc": "2.0", "id": 9, "method": "resources/list"}
    answer = gateway.client.post("/mcp", json=unknown, headers={**alice, "Mcp-Session-Id": session})
    assert answer.json()["error"]["code"] == -32601
    for method in ("ping", "tools/list", "logging/setLevel", "tools/call"):
        request = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {"level": "info"}}
        foreign = gateway.client.post("/mcp", json=request, headers={**bob, "Mcp-Session-Id": session})
        assert foreign.status_code == 404, (method, foreign.text)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    assert gateway.client.post("/mcp", json=cancel, headers={**bob, "Mcp-Session-Id": session}).status_code == 404
    assert gateway.client.delete("/mcp", headers={**bob, "Mcp-Session-Id": session}).status_code == 404
    ping = {"jsonrpc": "2.0", "id": 6, "method": "ping"}
    assert gateway.client.post("/mcp", json=ping, headers={**alice, "Mcp-Session-Id": session}).status_code == 200
