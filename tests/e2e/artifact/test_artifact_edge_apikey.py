"""``gateway.auth.mode: api_key`` at the edge on what ``cdk deploy`` ships (issue 26 item 5, GW-EDGE-1 (R3)): a
one-actor mesh synthesized and run by the artifact mesh, so every non-public method carries the cached ``REQUEST``
authorizer on ``X-API-Key``, run from the assembly under its own role, which reads the keys of
``gateway.auth.api_key_secret`` through the IAM proxy. test_artifact_edge_auth.py does the same for ``jwt``.

The keys' secret is the user's, named in the manifest and not created by the stack: the test stores it in moto once
the mesh runs, as an operator stores it before the first request (the authorizer and the gateway read it on first
use). Requests go to the API front (``api_url``) unsigned, as a client of an ``api_key`` API sends them. The mesh is
built once for this module (``key synth`` / ``key startup`` in the end-of-run report) and stopped when it ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from asya_local.artifact.mesh import ArtifactMesh
from tests.e2e.artifact.edge import authorizer_invocations, deployer_client, no_denials
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]

REPO = Path(__file__).resolve().parents[3]
SECRET: Final = "edgekey-client-keys"
#: Two keys, as during a rotation (GW-AUTH-3): both pass.
KEYS: Final = ("key-old-0123456789abcdef", "key-new-fedcba9876543210")
UNAUTHORIZED: Final = (401, {"message": "Unauthorized"})
TERMINAL: Final = ("succeeded", "failed", "canceled")


def _manifest() -> dict[str, Any]:
    return {
        "namespace": "edgekey",
        "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
        "flows": {"echoing": {"route": ["echo"]}},
        "gateway": {"auth": {"mode": "api_key", "api_key_secret": SECRET, "authorizer_cache_seconds": 300}},
    }


@pytest.fixture(scope="module")
def key_mesh(own_mesh: Callable[[dict[str, Any], str], AbstractContextManager[ArtifactMesh]]) -> Iterator[ArtifactMesh]:
    with own_mesh(_manifest(), "key") as mesh:
        deployer_client(mesh, "secretsmanager").create_secret(Name=SECRET, SecretString=json.dumps(list(KEYS)))
        yield mesh


@pytest.fixture
def mesh(key_mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    with no_denials(key_mesh) as mesh:
        yield mesh


def test_gw_edge_1_requests_without_a_valid_key_get_401_and_never_reach_the_gateway_function(
    mesh: ArtifactMesh,
) -> None:
    """No ``X-API-Key`` (refused by API Gateway before any invocation: the identity source is missing), an unknown
    key, and a valid key sent as a bearer token (the authorizer's identity source is ``X-API-Key`` only): 401 from
    the edge, and the API front relays none of them to a gateway function."""
    before = len(mesh.relayed())
    invoked = authorizer_invocations(mesh)
    cases = {
        "missing": {},
        "unknown": {"X-API-Key": "not-a-key"},
        "as bearer": {"Authorization": f"Bearer {KEYS[0]}"},
    }
    with httpx.Client(base_url=mesh.api_url, timeout=30) as client:
        for case, headers in cases.items():
            for method, path in (("GET", "/api/v1/mesh/some-task"), ("POST", "/api/v1/mesh/")):
                response = client.request(method, path, headers=headers, json={"payload": {"text": "x"}})
                assert (response.status_code, response.json()) == UNAUTHORIZED, f"{case} {method} {path}"
    assert mesh.relayed()[before:] == [], "a refused request reached a gateway function"
    # only the unknown key reaches the function, once per method (a refusal is not cached)
    assert authorizer_invocations(mesh) - invoked == 2


def test_gw_edge_1_either_key_of_a_rotation_creates_a_task_that_succeeds(mesh: ArtifactMesh) -> None:
    """Each key of the secret passes the edge and the app: the task is created through the gateway function, runs
    through the actor to ``succeeded``, and is read back with the other key."""
    with httpx.Client(base_url=mesh.api_url, timeout=30) as client:
        created = client.post(
            "/api/v1/mesh/",
            params={"flow": "echoing"},
            json={"payload": {"text": "Hello  Keys"}},
            headers={"X-API-Key": KEYS[0]},
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]

        def finished() -> dict[str, Any] | None:
            view: dict[str, Any] = client.get(f"/api/v1/mesh/{task_id}", headers={"X-API-Key": KEYS[1]}).json()
            return view if view.get("status") in TERMINAL else None

        task = wait_for(finished, f"task {task_id} to end", limit=120)
    assert task["status"] == "succeeded", task
    assert task["result"]["normalized"] == "hello keys"
    assert "POST /api/v1/mesh/" in mesh.relayed()


def test_gw_edge_1_a_key_is_checked_once_per_cache_period_under_the_authorizers_role(mesh: ArtifactMesh) -> None:
    """API Gateway caches the authorizer's answer per ``X-API-Key`` value: three requests on two methods with one key
    invoke it at most once (none when an earlier test cached that key). The function read the keys' secret through
    the IAM proxy under its own role, its only AWS call."""
    key = {"X-API-Key": KEYS[1]}
    with httpx.Client(base_url=mesh.api_url, timeout=30) as client:
        client.get("/api/v1/mesh/no-such-task", headers=key)  # cached from here on
        invoked = authorizer_invocations(mesh)
        for path in ("/api/v1/mesh/no-such-task", "/api/v1/mesh/no-such-task", "/api/v1/mesh/other/events"):
            assert client.get(path, headers=key).status_code == 404, path  # past the edge: the gateway's 404
    assert authorizer_invocations(mesh) == invoked
    spec = mesh.spec
    assert spec is not None and mesh.authorizers is not None
    authorizers = {f.name for f in spec.functions.values() if f.arn in mesh.authorizers.invocations}
    assert authorizers, "no authorizer function was invoked"
    calls = {(principal, action) for principal, action, _ in mesh.proxy.used() if principal in authorizers}
    assert calls == {(name, "secretsmanager:GetSecretValue") for name in authorizers}, calls
