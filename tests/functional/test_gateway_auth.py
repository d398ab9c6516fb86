"""Gateway authentication over real HTTP (GATEWAY section 2): ``api_key`` with keys from ``ASYA_API_KEYS`` and from a
Secrets Manager secret in moto, public routes, 401 shapes, and the modes that check nothing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from asya.manifest import GatewayAuth, Manifest
from asya.manifest import GatewayConfig as ManifestGateway
from asya_gateway import GatewayConfig, create_app
from tests.asgi import asgi_client

pytestmark = pytest.mark.functional

SECRET = "asya/demo/api-keys"
CHALLENGE = 'Bearer realm="asya-gateway"'


def _with_auth(manifest: Manifest, auth: GatewayAuth) -> Manifest:
    return manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})


def _client(mesh: Any, config: GatewayConfig, auth: GatewayAuth, **clients: Any) -> httpx.Client:
    app = create_app(
        config,
        manifest=_with_auth(mesh.manifest, auth),
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        **clients,
    )
    return asgi_client(app)


def test_api_key_from_env_gw_auth_4_7(mesh: Any) -> None:
    config = GatewayConfig.from_env({"ASYA_API_KEYS": "k1, k2"})
    auth = GatewayAuth(mode="api_key", api_key_secret=SECRET)
    with _client(mesh, config, auth) as client:
        anonymous = client.get("/api/v1/mesh/some-id")
        assert (anonymous.status_code, anonymous.json()) == (401, {"error": "authentication required"})
        assert anonymous.headers["www-authenticate"] == CHALLENGE
        assert anonymous.headers["x-request-id"]
        wrong = client.get("/api/v1/mesh/some-id", headers={"X-API-Key": "k3"})
        assert (wrong.status_code, wrong.json()) == (401, {"error": "invalid credentials"})
        assert wrong.headers["www-authenticate"] == CHALLENGE
        by_header = client.get("/api/v1/mesh/some-id", headers={"X-API-Key": "k2"})
        assert (by_header.status_code, by_header.json()) == (404, {"error": "not found"})
        by_bearer = client.get("/api/v1/mesh/some-id", headers={"Authorization": "Bearer k1"})
        assert by_bearer.status_code == 404
        unknown_path = client.get("/nowhere")
        assert unknown_path.status_code == 401
        a2a = client.post("/a2a/", json={})
        assert a2a.status_code == 401
        assert a2a.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32005, "message": "Authentication required"},
        }
        assert client.get("/health").status_code == 200  # public (GW-AUTH-2)


def test_api_key_from_secrets_manager_is_cached_gw_auth_4(mesh: Any) -> None:
    secrets = mesh.aws.session.client("secretsmanager")
    secrets.create_secret(Name=SECRET, SecretString=json.dumps(["s1", "s2"]))
    auth = GatewayAuth(mode="api_key", api_key_secret=SECRET)
    with _client(mesh, GatewayConfig(), auth, secretsmanager=secrets) as client:
        assert client.get("/api/v1/mesh/x", headers={"X-API-Key": "s2"}).status_code == 404
        assert client.get("/api/v1/mesh/x", headers={"X-API-Key": "nope"}).status_code == 401
        secrets.put_secret_value(SecretId=SECRET, SecretString="rotated")
        # within the 5 min cache the old keys still hold
        assert client.get("/api/v1/mesh/x", headers={"X-API-Key": "s1"}).status_code == 404
        assert client.get("/api/v1/mesh/x", headers={"X-API-Key": "rotated"}).status_code == 401


@pytest.mark.parametrize("key", ["only-key", "12345"])  # a numeric key is JSON too, but still one plain key
def test_plain_string_secret_is_one_key_gw_auth_4(mesh: Any, key: str) -> None:
    secrets = mesh.aws.session.client("secretsmanager")
    secrets.create_secret(Name=SECRET, SecretString=key)
    auth = GatewayAuth(mode="api_key", api_key_secret=SECRET)
    with _client(mesh, GatewayConfig(), auth, secretsmanager=secrets) as client:
        assert client.get("/api/v1/mesh/x", headers={"Authorization": f"bearer {key}"}).status_code == 404
        assert client.get("/api/v1/mesh/x", headers={"Authorization": f"Basic {key}"}).status_code == 401


def test_none_and_iam_modes_do_not_check_gw_auth_3_6(mesh: Any, caplog: Any) -> None:
    for auth in (GatewayAuth(mode="none", allow_unauthenticated=True), GatewayAuth(mode="iam")):
        with _client(mesh, GatewayConfig(), auth) as client:
            assert client.get("/api/v1/mesh/x").status_code == 404
    assert any("not authenticated" in record.getMessage() for record in caplog.records)


def test_secret_keys_are_cached_for_their_age_then_reread_gw_auth_4(mesh: Any) -> None:
    """Both keys of a rotation (old and new) hold while both are in the secret; a cache age of 0 rereads each time."""
    from asya_gateway.auth import SecretsManagerKeys

    secrets = mesh.aws.session.client("secretsmanager")
    secrets.create_secret(Name=SECRET, SecretString=json.dumps(["old"]))
    cached, fresh = SecretsManagerKeys(SECRET, client=secrets), SecretsManagerKeys(SECRET, client=secrets, ttl=0)
    assert cached.keys() == fresh.keys() == ("old",)
    secrets.put_secret_value(SecretId=SECRET, SecretString=json.dumps(["old", "new"]))
    assert (cached.keys(), fresh.keys()) == (("old",), ("old", "new"))
