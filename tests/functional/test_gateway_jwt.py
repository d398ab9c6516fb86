"""``jwt`` authentication end to end (GATEWAY GW-AUTH-5): the gateway app over real HTTP, verifying bearer tokens
against a JWKS that an issuer app serves on loopback, with RS256 and ES256 keys; the key cache and its refetch on an
unknown ``kid``; and the manifest's checks of ``jwks_url``, ``issuer`` and ``audience``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from asya.exceptions import ManifestError
from asya.manifest import GatewayAuth, Manifest, parse_manifest
from asya.manifest import GatewayConfig as ManifestGateway
from asya_gateway import GatewayConfig, create_app
from asya_gateway.jwtauth import JwksKeys, JwtAuthenticator
from tests.asgi import asgi_client

pytestmark = pytest.mark.functional

ISSUER = "https://idp.example.com/pool-1"
AUDIENCE = "asya-api"
CHALLENGE = 'Bearer realm="asya-gateway"'
#: Reached only after authentication passed: an unknown task answers 404.
PROTECTED = "/api/v1/mesh/no-such-task"
_NO_SUB = "invalid credentials: the token has no 'sub' claim (the subject it acts as)"


class Issuer:
    """An OIDC issuer's JWKS endpoint: the published keys can change, and every fetch is counted."""

    def __init__(self) -> None:
        self.rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
        self.ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
        self.published: list[Any] = [self.rsa, self.ec]
        self.fetches = 0

    async def jwks(self, request: Request) -> JSONResponse:
        self.fetches += 1
        return JSONResponse(KeySet(self.published).as_dict(private=False))

    def token(self, key: Any, alg: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "iat": now, "exp": now + 300, **claims}
        return jwt.encode({"alg": alg, "kid": key.kid}, {k: v for k, v in body.items() if v is not None}, key)


@pytest.fixture
def issuer(serve_asgi: Callable[[Any], str]) -> tuple[Issuer, str]:
    idp = Issuer()
    base = serve_asgi(Starlette(routes=[Route("/.well-known/jwks.json", idp.jwks)]))
    return idp, f"{base}/.well-known/jwks.json"


@pytest.fixture
def client(mesh: Any, issuer: tuple[Issuer, str]) -> httpx.Client:
    _, jwks_url = issuer
    auth = GatewayAuth(mode="jwt", jwks_url=jwks_url, issuer=ISSUER, audience=AUDIENCE)
    manifest: Manifest = mesh.manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})
    app = create_app(GatewayConfig(), manifest=manifest, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)
    return asgi_client(app)


def _get(client: httpx.Client, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return client.get(PROTECTED, headers=headers)


def _refused(response: httpx.Response, message: str = "invalid credentials") -> bool:
    return (
        response.status_code == 401
        and response.json() == {"error": message}
        and response.headers["www-authenticate"] == CHALLENGE
    )


def test_gw_auth_5_rs256_and_es256_tokens_pass(client: httpx.Client, issuer: tuple[Issuer, str]) -> None:
    idp, _ = issuer
    with client:
        assert _get(client, idp.token(idp.rsa, "RS256")).status_code == 404
        assert _get(client, idp.token(idp.ec, "ES256")).status_code == 404
        # an audience list holding ours is accepted (RFC 7519 4.1.3)
        assert _get(client, idp.token(idp.rsa, "RS256", aud=["other", AUDIENCE])).status_code == 404
        assert client.get("/health").status_code == 200  # public (GW-AUTH-2)
    assert idp.fetches == 1, "the JWKS is cached"


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("expired", {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}),
        ("wrong audience", {"aud": "someone-else"}),
        ("wrong issuer", {"iss": "https://evil.example.com"}),
        ("not yet valid (nbf)", {"nbf": int(time.time()) + 3600}),
        ("no expiry", {"exp": None}),
    ],
)
def test_gw_auth_5_invalid_claims_are_refused(
    client: httpx.Client, issuer: tuple[Issuer, str], case: str, claims: dict[str, Any]
) -> None:
    idp, _ = issuer
    with client:
        assert _refused(_get(client, idp.token(idp.rsa, "RS256", **claims))), case


def test_gw_auth_5_unknown_kid_is_refetched_once_then_refused(client: httpx.Client, issuer: tuple[Issuer, str]) -> None:
    idp, _ = issuer
    stranger = RSAKey.generate_key(2048, parameters={"kid": "stranger"})
    with client:
        assert _get(client, idp.token(idp.rsa, "RS256")).status_code == 404
        assert idp.fetches == 1
        # a kid the cached set lacks triggers one refetch; the issuer does not publish it either: refused
        assert _refused(_get(client, idp.token(stranger, "RS256")))
        assert idp.fetches == 2
        # within the refetch interval a forged kid does not reach the issuer again
        assert _refused(_get(client, idp.token(stranger, "RS256")))
        assert idp.fetches == 2


def test_gw_auth_5_a_rotated_key_is_picked_up_on_its_first_token(issuer: tuple[Issuer, str]) -> None:
    idp, jwks_url = issuer
    keys = JwksKeys(jwks_url, min_refetch=0)
    authenticator = JwtAuthenticator(keys, issuer=ISSUER, audience=AUDIENCE)
    rotated = ECKey.generate_key("P-256", parameters={"kid": "ec-2"})
    assert keys.key_set("ec-1") is not None and idp.fetches == 1
    idp.published = [idp.rsa, rotated]
    headers = Headers({"authorization": f"Bearer {idp.token(rotated, 'ES256')}"})
    assert asyncio.run(authenticator.failure(headers)) is None
    assert idp.fetches == 2


@pytest.mark.parametrize("alg", ["HS256", "none"])
def test_gw_auth_5_other_algorithms_are_refused(client: httpx.Client, issuer: tuple[Issuer, str], alg: str) -> None:
    """A public key must never serve as an HMAC secret, and unsigned tokens are never accepted."""
    idp, _ = issuer
    good = idp.token(idp.rsa, "RS256")
    header, payload, _ = good.split(".")
    forged_header = base64.urlsafe_b64encode(json.dumps({"alg": alg, "kid": "rsa-1"}).encode()).rstrip(b"=").decode()
    with client:
        assert _refused(_get(client, f"{forged_header}.{payload}."))
        assert _refused(_get(client, f"{header}.{payload}.AAAA"))  # a bad signature


def test_gw_auth_5_missing_or_malformed_tokens(client: httpx.Client, issuer: tuple[Issuer, str]) -> None:
    idp, _ = issuer
    with client:
        assert _refused(_get(client, None), "authentication required")
        assert _refused(_get(client, "not-a-jwt"))
        # the api_key header is not a credential in jwt mode
        token = idp.token(idp.rsa, "RS256")
        assert _refused(client.get(PROTECTED, headers={"X-API-Key": token}), "authentication required")


def test_gw_auth_5_unreachable_issuer_fails_closed() -> None:
    calls: list[str] = []

    def fetch(url: str) -> bytes:
        calls.append(url)
        raise OSError("connection refused")

    keys = JwksKeys("https://idp.example.com/jwks", fetch=fetch, clock=lambda: 100.0)
    assert keys.key_set("rsa-1") is None
    assert keys.key_set("rsa-1") is None
    assert len(calls) == 1, "retried at the refetch pace, not per request"


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            {"mode": "jwt", "jwks_url": "http://idp.example.com/jwks", "issuer": ISSUER, "audience": AUDIENCE},
            "gateway.auth.jwks_url: 'http://idp.example.com/jwks' must be an https URL",
        ),
        (
            {"mode": "jwt", "jwks_url": "https://idp.example.com/jwks", "issuer": " ", "audience": AUDIENCE},
            "gateway.auth.issuer: required when mode is 'jwt'",
        ),
        (
            {"mode": "jwt", "jwks_url": "https://idp.example.com/jwks", "issuer": ISSUER},
            "gateway.auth.audience: required when mode is 'jwt'",
        ),
    ],
)
def test_gw_auth_5_manifest_validates_the_jwt_settings(auth: dict[str, Any], message: str) -> None:
    data = {"namespace": "n", "gateway": {"auth": auth}}
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    assert message in str(info.value)


def test_gw_edge_10_a_token_without_sub_is_refused_with_a_clear_401(
    client: httpx.Client, issuer: tuple[Issuer, str]
) -> None:
    idp, _ = issuer
    with client:
        assert _refused(_get(client, idp.token(idp.rsa, "RS256", sub=None)), _NO_SUB)
        assert _refused(_get(client, idp.token(idp.rsa, "RS256", sub="")), _NO_SUB)
