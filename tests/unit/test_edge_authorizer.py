"""The edge authorizer's code (GW-EDGE-1..3 (R3)) against forged and valid credentials: the Lambda API Gateway calls
before a non-public method under ``api_key`` / ``jwt``. It shares :mod:`asya_gateway.jwtauth` with the app, so these
also pin the app's check (GW-AUTH-5). The JWKS is served by an injected fetch: no network.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from asya.manifest import GatewayAuth
from asya_gateway.auth import StaticKeys
from asya_gateway.authorizer import EdgeAuthorizer, UnauthorizedError, method_route
from asya_gateway.jwtauth import JwksKeys, JwtAuthenticator, TokenRefusedError, token_scopes

pytestmark = pytest.mark.unit

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Pool1"
CLIENT_ID = "app-client-1"
API = "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod"
METHOD_ARN = f"{API}/GET/api/v1/mesh/t-1"
PRODUCER_ARN = f"{API}/POST/api/v1/mesh/t-1/events"
KEY = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
STRANGER = RSAKey.generate_key(2048, parameters={"kid": "stranger"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(**claims: Any) -> dict[str, Any]:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "user-1", "iat": now, "exp": now + 300, **claims}
    return {k: v for k, v in body.items() if v is not None}


def _token(key: Any = KEY, **claims: Any) -> str:
    return jwt.encode({"alg": "RS256", "kid": key.kid}, _claims(**claims), key)


def _authorizer(mode: str = "jwt") -> EdgeAuthorizer:
    if mode == "jwt":
        auth = GatewayAuth(mode="jwt", jwks_url="https://idp.example.com/jwks", issuer=ISSUER, audience=CLIENT_ID)
        jwks = json.dumps(KeySet([KEY]).as_dict(private=False)).encode()
        keys = JwksKeys("https://idp.example.com/jwks", fetch=lambda url: jwks)
        tokens = JwtAuthenticator(keys, issuer=ISSUER, audience=CLIENT_ID)
        return EdgeAuthorizer(auth, reporter_keys=StaticKeys(["reporter-key"]), tokens=tokens)
    auth = GatewayAuth(mode="api_key", api_key_secret="asya/keys")
    return EdgeAuthorizer(auth, keys=StaticKeys(["client-key"]), reporter_keys=StaticKeys(["reporter-key"]))


def _token_event(authorization: str, method_arn: str = METHOD_ARN) -> dict[str, Any]:
    return {"type": "TOKEN", "authorizationToken": authorization, "methodArn": method_arn}


def _request_event(headers: dict[str, str], method_arn: str = METHOD_ARN) -> dict[str, Any]:
    return {"type": "REQUEST", "methodArn": method_arn, "headers": headers}


def _refused(authorizer: EdgeAuthorizer, event: dict[str, Any]) -> bool:
    with pytest.raises(UnauthorizedError) as info:
        authorizer.decide(event)
    return str(info.value) == "Unauthorized"  # the exact message API Gateway turns into its 401


def test_gw_edge_1_a_valid_token_gets_an_allow_policy_for_the_stage_with_its_subject_and_scopes() -> None:
    answer = _authorizer().decide(_token_event(f"Bearer {_token(scope='tasks/write tasks/read')}"))
    assert answer["principalId"] == "user-1"
    statement = answer["policyDocument"]["Statement"][0]
    # cached per token and reused on the other methods: the policy covers the stage
    assert statement == {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": f"{API}/*/*"}
    assert answer["context"] == {"sub": "user-1", "scope": "tasks/read tasks/write"}


def test_gw_edge_1_alg_none_is_refused() -> None:
    _, payload, _ = _token().split(".")
    forged = f"{_b64(json.dumps({'alg': 'none', 'kid': 'rsa-1'}).encode())}.{payload}."
    assert _refused(_authorizer(), _token_event(f"Bearer {forged}"))


def test_gw_edge_1_hs256_signed_with_the_rsa_public_key_is_refused() -> None:
    public_pem = KEY.as_pem(private=False)
    header = _b64(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())
    payload = _b64(json.dumps(_claims()).encode())
    signature = _b64(hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    assert _refused(_authorizer(), _token_event(f"Bearer {header}.{payload}.{signature}"))


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("expired", {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}),
        ("wrong aud", {"aud": "another-client"}),
        ("wrong iss", {"iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Evil"}),
        ("no exp", {"exp": None}),
    ],
)
def test_gw_edge_1_invalid_claims_are_refused(case: str, claims: dict[str, Any]) -> None:
    assert _refused(_authorizer(), _token_event(f"Bearer {_token(**claims)}")), case


def test_gw_edge_1_an_unknown_kid_is_refused() -> None:
    assert _refused(_authorizer(), _token_event(f"Bearer {_token(STRANGER)}"))


def test_gw_edge_1_a_missing_or_non_bearer_credential_is_refused() -> None:
    authorizer = _authorizer()
    assert _refused(authorizer, _token_event(""))
    assert _refused(authorizer, _token_event(f"Basic {_token()}"))
    assert _refused(authorizer, _token_event("Bearer not-a-jwt"))


def test_gw_edge_3_a_cognito_access_token_passes_on_its_client_id() -> None:
    """Cognito access tokens carry no ``aud``: ``token_use`` ``access`` and ``client_id`` = the audience pass."""
    token = _token(aud=None, token_use="access", client_id=CLIENT_ID, scope="asya/tasks.write")
    answer = _authorizer().decide(_token_event(f"Bearer {token}"))
    assert answer["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert answer["context"]["scope"] == "asya/tasks.write"


@pytest.mark.parametrize(
    ("case", "claims"),
    [
        ("another client", {"aud": None, "token_use": "access", "client_id": "another-client"}),
        ("an id token without aud", {"aud": None, "token_use": "id", "client_id": CLIENT_ID}),
        ("no client_id", {"aud": None, "token_use": "access"}),
    ],
)
def test_gw_edge_3_a_token_without_aud_is_refused_unless_an_access_token_of_our_client(
    case: str, claims: dict[str, Any]
) -> None:
    assert _refused(_authorizer(), _token_event(f"Bearer {_token(**claims)}")), case


def test_gw_edge_4_a_token_without_the_flows_scope_still_authenticates_the_scope_is_checked_at_creation() -> None:
    """The authorizer cannot see the flow (it is in the body): it passes the granted scopes; the app refuses."""
    answer = _authorizer().decide(_token_event(f"Bearer {_token(scope='other/scope')}"))
    assert answer["context"]["scope"] == "other/scope"
    assert token_scopes({"scope": "a b", "scp": ["c"]}) == {"a", "b", "c"}


def test_gw_edge_1_api_keys_pass_on_x_api_key_and_wrong_or_missing_keys_are_refused() -> None:
    authorizer = _authorizer("api_key")
    answer = authorizer.decide(_request_event({"X-API-Key": "client-key"}))
    assert answer["policyDocument"]["Statement"][0]["Resource"] == f"{API}/*/*"
    assert _refused(authorizer, _request_event({"X-API-Key": "wrong"}))
    assert _refused(authorizer, _request_event({}))
    # a reporter key is no client credential
    assert _refused(authorizer, _request_event({"X-API-Key": "reporter-key"}))


@pytest.mark.parametrize("mode", ["api_key", "jwt"])
def test_gw_edge_2_the_producer_route_takes_reporter_keys_only_and_its_policy_covers_only_it(mode: str) -> None:
    authorizer = _authorizer(mode)
    answer = authorizer.decide(_request_event({"x-asya-reporter-key": "reporter-key"}, PRODUCER_ARN))
    assert answer["policyDocument"]["Statement"][0]["Resource"] == f"{API}/POST/api/v1/mesh/*/events"
    client_credential = {"X-API-Key": "client-key", "Authorization": f"Bearer {_token()}"}
    assert _refused(authorizer, _request_event(client_credential, PRODUCER_ARN))
    assert _refused(authorizer, _request_event({"X-Asya-Reporter-Key": "client-key"}, PRODUCER_ARN))


def test_method_arns_split_into_the_stage_method_and_path() -> None:
    route = method_route(PRODUCER_ARN)
    assert (route.api_arn, route.method, route.path) == (API, "POST", "/api/v1/mesh/t-1/events")
    with pytest.raises(UnauthorizedError):
        method_route("garbage")


def test_gw_auth_5_the_app_and_the_edge_share_one_verify() -> None:
    keys = JwksKeys("https://idp.example.com/jwks", fetch=lambda url: json.dumps(KeySet([KEY]).as_dict()).encode())
    authenticator = JwtAuthenticator(keys, issuer=ISSUER, audience=CLIENT_ID)
    assert authenticator.verify(_token())["sub"] == "user-1"
    with pytest.raises(TokenRefusedError):
        authenticator.verify(_token(aud="x"))


@pytest.mark.parametrize("sub", [None, "", 7])
def test_gw_edge_10_a_token_without_a_subject_is_refused_at_the_edge(sub: Any) -> None:
    assert _refused(_authorizer(), _token_event(f"Bearer {_token(sub=sub)}"))
    with pytest.raises(TokenRefusedError, match="the token has no 'sub' claim"):
        JwtAuthenticator(
            JwksKeys("https://idp.example.com/jwks", fetch=lambda url: json.dumps(KeySet([KEY]).as_dict()).encode()),
            issuer=ISSUER,
            audience=CLIENT_ID,
        ).verify(_token(sub=sub))
