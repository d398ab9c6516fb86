"""Auth at the edge on what ``cdk deploy`` ships (issue 26 item 5, GW-EDGE-1/2 (R3)): a one-actor mesh with
``gateway.auth.mode: jwt`` synthesized and run by the artifact mesh, so every non-public method carries the cached
TOKEN authorizer and the producer route the reporter REQUEST authorizer, both the synthesized authorizer function
run from the assembly under its own role (its AWS calls through the IAM proxy). The JWKS is served on loopback by
:class:`_Issuer` (``jwks_url`` may be ``http`` on loopback). Requests go unsigned to the API front (``api_url``),
as a client of a ``jwt`` API sends them.

The mesh is built once for this module (synth and start are reported at the end of the run as ``edge synth`` and
``edge startup``) and stopped when the module ends, before the example's mesh of test_artifact_suite.py starts: this
file sorts before it, so that suite's grant drift check stays the session's last test. That check reads the example
mesh's IAM proxy only; this mesh has its own proxy, and every test here asserts zero denials on it instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from joserfc.jwk import RSAKey

from asya_local.artifact.mesh import ArtifactMesh
from tests.e2e.artifact.edge import (
    JwksIssuer,
    authorizer_calls,
    authorizer_invocations,
    deployer_client,
    no_denials,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.artifact, pytest.mark.xdist_group("artifact")]

REPO = Path(__file__).resolve().parents[3]
ISSUER: Final = "https://idp.example.com/edge-pool"
AUDIENCE: Final = "asya-edge-client"
UNAUTHORIZED: Final = (401, {"message": "Unauthorized"})
PUBLIC: Final = ("/health", "/openapi.json", "/.well-known/agent.json", "/.well-known/agent-card.json")
TERMINAL: Final = ("succeeded", "failed", "canceled")


class _Issuer(JwksIssuer):
    """The module's issuer: a fresh port each run (the module synthesizes its mesh each run anyway)."""

    def __init__(self) -> None:
        super().__init__(issuer=ISSUER, audience=AUDIENCE)


def _manifest(jwks_url: str) -> dict[str, Any]:
    return {
        "namespace": "edgeart",
        "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
        "flows": {"echoing": {"route": ["echo"]}},
        "gateway": {
            "auth": {
                "mode": "jwt",
                "jwks_url": jwks_url,
                "issuer": ISSUER,
                "audience": AUDIENCE,
                "authorizer_cache_seconds": 300,
            }
        },
    }


@pytest.fixture(scope="module")
def issuer() -> Iterator[_Issuer]:
    with _Issuer() as running:
        yield running


@pytest.fixture(scope="module")
def edge_mesh(
    issuer: _Issuer, own_mesh: Callable[[dict[str, Any], str], AbstractContextManager[ArtifactMesh]]
) -> Iterator[ArtifactMesh]:
    with own_mesh(_manifest(issuer.jwks_url), "edge") as mesh:
        yield mesh


@pytest.fixture
def edge(edge_mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    with no_denials(edge_mesh) as mesh:
        yield mesh


def _method_functions(mesh: ArtifactMesh) -> set[str]:
    """The functions the API methods integrate (the gateway's web functions)."""
    spec = mesh.spec
    assert spec is not None
    return {spec.functions[str(m.function)].name for m in spec.methods}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_gw_edge_1_refused_requests_get_401_and_never_reach_the_gateway_function(
    edge: ArtifactMesh, issuer: _Issuer
) -> None:
    """No credential, a non-bearer one, a token signed by another key under the issuer's ``kid``, an expired token,
    another audience's: API Gateway's 401 from the synthesized authorizer, and the gateway function is never
    invoked (the API front relayed none of them)."""
    before = len(edge.relayed())
    other_key = RSAKey.generate_key(2048, parameters={"kid": "edge-1"})
    now = int(time.time())
    cases = {
        "missing": {},
        "not bearer": {"Authorization": "Basic dXNlcjpwdw=="},
        "forged": _bearer(issuer.token(other_key)),
        "expired": _bearer(issuer.token(exp=now - 3600, iat=now - 7200)),
        "other audience": _bearer(issuer.token(aud="someone-else")),
    }
    invoked = authorizer_invocations(edge)
    with httpx.Client(base_url=edge.api_url, timeout=30) as client:
        for case, headers in cases.items():
            for method, path in (("GET", "/api/v1/mesh/some-task"), ("POST", "/api/v1/mesh/")):
                response = client.request(method, path, headers=headers, json={"payload": {"text": "x"}})
                assert (response.status_code, response.json()) == UNAUTHORIZED, f"{case} {method} {path}"
    assert edge.relayed()[before:] == [], "a refused request reached a gateway function"
    # a missing or non-bearer header fails the identity validation before any invocation (as API Gateway does);
    # each token is one invocation (a refusal is not cached, so the second method invokes again)
    assert authorizer_invocations(edge) - invoked == 3 * 2


def test_gw_edge_1_a_valid_token_creates_a_task_that_succeeds_and_is_read(edge: ArtifactMesh, issuer: _Issuer) -> None:
    """A token of the issuer passes the edge: the task is created through the gateway function, runs through the
    actor to ``succeeded`` and is read back with the same token, its creator's principal the token's ``sub``."""
    headers = _bearer(issuer.token(sub="edge-reader"))
    with httpx.Client(base_url=edge.api_url, timeout=30, headers=headers) as client:
        created = client.post("/api/v1/mesh/", params={"flow": "echoing"}, json={"payload": {"text": "Hello  Edge"}})
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]

        def finished() -> dict[str, Any] | None:
            view: dict[str, Any] = client.get(f"/api/v1/mesh/{task_id}").json()
            return view if view.get("status") in TERMINAL else None

        task = wait_for(finished, f"task {task_id} to end", limit=120)
    assert task["status"] == "succeeded", task
    assert task["result"]["normalized"] == "hello edge"
    assert "POST /api/v1/mesh/" in edge.relayed()


def test_gw_edge_1_the_authorizers_answer_is_cached_by_identity_source(edge: ArtifactMesh, issuer: _Issuer) -> None:
    """API Gateway caches the authorizer's policy per ``Authorization`` value for ``authorizer_cache_seconds`` and
    reuses it on other methods: the same token on three requests of two methods invokes the authorizer once; another
    token invokes it again. Counted on invocations, not on time."""
    first, second = _bearer(issuer.token(sub="cache-1")), _bearer(issuer.token(sub="cache-2"))
    invoked = authorizer_invocations(edge)
    with httpx.Client(base_url=edge.api_url, timeout=30) as client:
        for path in ("/api/v1/mesh/no-such-task", "/api/v1/mesh/no-such-task", "/api/v1/mesh/other/events"):
            assert client.get(path, headers=first).status_code == 404, path  # past the edge: the gateway's 404
        assert authorizer_invocations(edge) - invoked == 1
        assert client.get("/api/v1/mesh/no-such-task", headers=second).status_code == 404
    assert authorizer_invocations(edge) - invoked == 2


def test_gw_edge_1_the_public_routes_stay_open_without_an_invocation(edge: ArtifactMesh) -> None:
    """Health, the OpenAPI document and the agent cards need no credential at the edge (their methods are ``NONE``)
    and invoke no authorizer."""
    invoked = authorizer_invocations(edge)
    with httpx.Client(base_url=edge.api_url, timeout=30) as client:
        for path in PUBLIC:
            assert client.get(path).status_code == 200, path
    assert authorizer_invocations(edge) == invoked


def test_gw_edge_2_the_producer_route_takes_the_reporter_secret_read_by_the_authorizer_under_its_role(
    edge: ArtifactMesh, issuer: _Issuer
) -> None:
    """The producer route's REQUEST authorizer is the same function: it reads the reporter keys' secret through the
    IAM proxy under its own role (zero denials; the read is its only AWS call, recorded by the proxy), passes that key
    and refuses a client's token there."""
    spec = edge.spec
    assert spec is not None
    (name,) = spec.secrets
    key = deployer_client(edge, "secretsmanager").get_secret_value(SecretId=name)["SecretString"]
    fly = {"type": "fly", "data": 1}
    with httpx.Client(base_url=edge.api_url, timeout=30) as client:
        path = "/api/v1/mesh/no-such-task/events"
        assert client.post(path, json=fly, headers={"X-Asya-Reporter-Key": key}).status_code == 404  # past the edge
        refused = client.post(path, json=fly, headers=_bearer(issuer.token()))
        assert (refused.status_code, refused.json()) == UNAUTHORIZED
        wrong = client.post(path, json=fly, headers={"X-Asya-Reporter-Key": "not-the-key"})
        assert (wrong.status_code, wrong.json()) == UNAUTHORIZED
    authorizers, calls = authorizer_calls(edge)
    assert authorizers and not authorizers & _method_functions(edge)
    # its only AWS call, made through the IAM proxy under its own role (the drift check of the example's mesh relies
    # on it: test_artifact_suite.py)
    assert calls == {(name, "secretsmanager:GetSecretValue") for name in authorizers}, calls
