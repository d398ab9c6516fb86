"""Authorization by claims under ``jwt`` (GW-EDGE-4, GW-EDGE-5 (R3)): scopes required per flow at task creation
(403 naming the missing scope), and tasks visible to their creator's subject only under ``owner_only`` (owner stored
on the task item by the create's own write; views, cancel, SSE and the listing filtered). The gateway app over real
HTTP against moto, tokens from an in-test issuer (tests/functional/test_gateway_jwt.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from asya.manifest import GatewayAuth, Manifest
from asya.manifest import GatewayConfig as ManifestGateway
from asya_gateway import GatewayConfig, create_app
from asya_gateway.mcp import call_task_id
from tests.functional.test_gateway_jwt import AUDIENCE, ISSUER, Issuer, issuer  # noqa: F401 (fixture)

pytestmark = pytest.mark.functional

FLOW = "text-pipeline"


@pytest.fixture
def client(mesh: Any, serve_asgi: Callable[[Any], str], issuer: tuple[Issuer, str]) -> httpx.Client:  # noqa: F811
    _, jwks_url = issuer
    auth = GatewayAuth(
        mode="jwt",
        jwks_url=jwks_url,
        issuer=ISSUER,
        audience=AUDIENCE,
        flow_scopes={FLOW: ["asya/tasks.write", "asya/text"]},
        owner_only=True,
    )
    manifest: Manifest = mesh.manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})
    app = create_app(GatewayConfig(), manifest=manifest, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    return httpx.Client(base_url=serve_asgi(app))


def _as(idp: Issuer, sub: str, scope: str = "asya/tasks.write asya/text") -> dict[str, str]:
    return {"Authorization": f"Bearer {idp.token(idp.rsa, 'RS256', sub=sub, scope=scope)}"}


def _create(client: httpx.Client, headers: dict[str, str], flow: str = FLOW) -> httpx.Response:
    return client.post(f"/api/v1/mesh/?flow={flow}", json={"payload": {"text": "Hello"}}, headers=headers)


def test_gw_edge_4_a_flow_needs_its_scopes_and_the_403_names_the_missing_one(
    client: httpx.Client,
    issuer: tuple[Issuer, str],  # noqa: F811
) -> None:
    idp, _ = issuer
    with client:
        refused = _create(client, _as(idp, "alice", scope="asya/tasks.write"))
        assert refused.status_code == 403
        assert refused.json() == {"error": "missing scope 'asya/text' for flow 'text-pipeline'"}
        # Okta-style scp lists count too
        scp = {
            "Authorization": f"Bearer {idp.token(idp.rsa, 'RS256', sub='alice', scp=['asya/tasks.write', 'asya/text'])}"
        }
        assert _create(client, scp).status_code == 201
        # a flow without listed scopes needs none
        assert _create(client, _as(idp, "alice", scope=""), flow="sentences").status_code == 201


def test_gw_edge_5_a_task_is_visible_to_its_creator_only(
    client: httpx.Client,
    issuer: tuple[Issuer, str],  # noqa: F811
) -> None:
    idp, _ = issuer
    alice, bob = _as(idp, "alice"), _as(idp, "bob")
    with client:
        created = _create(client, alice)
        assert created.status_code == 201
        task_id = created.json()["id"]
        view = client.get(f"/api/v1/mesh/{task_id}", headers=alice)
        assert view.status_code == 200 and view.json()["owner"] == "alice"
        # another subject sees no such task: the same 404 as an unknown id
        assert client.get(f"/api/v1/mesh/{task_id}", headers=bob).status_code == 404
        assert client.get(f"/api/v1/mesh/{task_id}/events", headers=bob).status_code == 404
        assert client.delete(f"/api/v1/mesh/{task_id}", headers=bob).status_code == 404
        bob_task = _create(client, bob).json()["id"]
        listed = {t["id"] for t in client.get("/api/v1/mesh/", headers=alice).json()["messages"]}
        assert listed == {task_id}
        listed = {t["id"] for t in client.get("/api/v1/mesh/", headers=bob).json()["messages"]}
        assert listed == {bob_task}
        assert client.delete(f"/api/v1/mesh/{task_id}", headers=alice).status_code == 204


def _a2a(method: str, task_id: str) -> dict[str, Any]:
    params: dict[str, Any] = {"id": task_id}
    if method == "message/send":
        text = {"kind": "text", "text": "more"}
        params = {"message": {"role": "user", "parts": [text], "messageId": "m-1", "taskId": task_id}}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


#: Every path that reads or acts on a task by id (GW-EDGE-7 (R3)): (method, path, JSON body); ``{id}`` is the task's.
_PATHS: list[tuple[str, str, Any]] = [
    ("GET", "/api/v1/mesh/{id}", None),
    ("DELETE", "/api/v1/mesh/{id}", None),
    ("GET", "/api/v1/mesh/{id}/events", None),
    ("GET", "/api/v1/mesh/events?ids={id}", None),
    ("GET", "/api/v1/mesh/{id}/history", None),
    ("POST", "/api/v1/mesh/{id}/retry", {}),
    ("POST", "/api/v1/mesh/{id}/retry", {"from": 0}),
    ("POST", "/api/v1/mesh/{id}/resume", {"input": {"ok": True}}),
    ("POST", "/a2a", "tasks/get"),
    ("POST", "/a2a", "tasks/cancel"),
    ("POST", "/a2a", "tasks/resubscribe"),
    ("POST", "/a2a", "message/send"),
]


def _not_found(client: httpx.Client, method: str, path: str, body: Any, task_id: str, headers: dict[str, str]) -> bool:
    """Whether the answer is the one an unknown id gets: REST 404 ``not found``, A2A -32001 (streams are opened only
    far enough to read the status and the first bytes)."""
    if path == "/a2a":
        body = _a2a(body, task_id)
    with client.stream(method, path.replace("{id}", task_id), json=body, headers=headers) as response:
        if path == "/a2a":
            first = next(response.iter_text(), "") if response.status_code == 200 else ""
            return '"code":-32001' in first.replace(" ", "")
        if response.status_code != 404:
            return False
        return bool(json.loads(response.read()) == {"error": "not found"})


@pytest.mark.parametrize(("method", "path", "body"), _PATHS, ids=[f"{m} {p} {b}" for m, p, b in _PATHS])
def test_gw_edge_7_another_subject_gets_not_found_on_every_path(
    client: httpx.Client,
    issuer: tuple[Issuer, str],  # noqa: F811
    method: str,
    path: str,
    body: Any,
) -> None:
    """GW-EDGE-7 (R3): bob is answered as for an unknown id on each path of alice's task; alice is not."""
    idp, _ = issuer
    alice, bob = _as(idp, "alice"), _as(idp, "bob")
    with client:
        task_id = _create(client, alice).json()["id"]
        assert _not_found(client, method, path, body, task_id, bob)
        assert _not_found(client, method, path, body, "no-such-task", alice)  # the answer bob got
        assert not _not_found(client, method, path, body, task_id, alice)


def _status(client: httpx.Client, task_id: str, headers: dict[str, str]) -> str:
    return str(client.get(f"/api/v1/mesh/{task_id}", headers=headers).json()["status"])


def test_gw_edge_7_mcp_cancel_and_recall_of_another_subjects_call(
    client: httpx.Client,
    issuer: tuple[Issuer, str],  # noqa: F811
) -> None:
    """GW-EDGE-7, GW-EDGE-9: alice's session id is hers: bob's re-sent ``tools/call`` and his
    ``notifications/cancelled`` naming it are answered as for an unknown session (404), her task runs on and he gets
    no task; alice's own notification cancels it."""
    idp, _ = issuer
    alice, bob = _as(idp, "alice"), _as(idp, "bob")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": FLOW, "arguments": {"text": "Hi"}}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    streamed = {"Accept": "application/json, text/event-stream"}
    with client:
        session = client.post("/mcp", json=init, headers=alice).headers["mcp-session-id"]
        task_id = call_task_id(session, 2)
        # the task exists once the response starts; leaving the stream leaves it running (handshake era)
        with client.stream("POST", "/mcp", json=call, headers={**alice, **streamed, "Mcp-Session-Id": session}) as r:
            assert r.status_code == 200
        assert _status(client, task_id, alice) == "pending"
        with client.stream("POST", "/mcp", json=call, headers={**bob, **streamed, "Mcp-Session-Id": session}) as r:
            assert r.status_code == 404
        assert client.get("/api/v1/mesh/", headers=bob).json()["messages"] == []
        assert client.post("/mcp", json=cancel, headers={**bob, "Mcp-Session-Id": session}).status_code == 404
        assert _status(client, task_id, alice) == "pending"
        assert client.post("/mcp", json=cancel, headers={**alice, "Mcp-Session-Id": session}).status_code == 202
        assert _status(client, task_id, alice) == "canceled"


def test_gw_edge_5_the_owner_rides_on_the_create_item_under_1_kib(mesh: Any) -> None:
    """GW-DATA-8: no extra write; the owner adds its length to the one task item."""
    from asya.store import records as rec

    item = rec.new_task_item(
        "t" * 36,
        actor="normalize",
        flow=FLOW,
        deadline_at=None,
        context_id=None,
        now_ms="2026-01-01T00:00:00.000Z",
        owner="s" * 128,
    )
    assert item["owner"] == {"S": "s" * 128}
    assert len(str(item).encode()) < 1024
