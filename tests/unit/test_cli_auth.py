"""How the CLI authenticates to a gateway (GW-AUTH-3, GW-AUTH-4): API key header, IAM SigV4 for execute-api URLs,
nothing locally. Requests are built and signed in memory; nothing is sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from asya_local.auth import ApiKeyAuth, SigV4Auth, gateway_auth
from asya_local.exceptions import GatewayAuthError
from asya_local.sse import error_message

pytestmark = pytest.mark.unit

DEPLOYED = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"


class _Session:
    """The part of ``boto3.Session`` the CLI uses."""

    def __init__(self, credentials: Credentials | None, region: str | None = None) -> None:
        self._credentials = credentials
        self.region_name = region

    def get_credentials(self) -> Credentials | None:
        return self._credentials


def _signed(auth: httpx.Auth, request: httpx.Request) -> httpx.Request:
    flow = auth.sync_auth_flow(request)
    return next(flow)


def _credentials(token: str | None = None) -> Credentials:
    return Credentials("AKIDEXAMPLE", "secret", token)


def test_local_url_sends_no_credentials() -> None:
    assert gateway_auth("http://127.0.0.1:8080", {}, session=_Session(None)) is None


def test_gw_auth_4_api_key_header_wins() -> None:
    auth = gateway_auth(DEPLOYED, {"ASYA_API_KEY": " k-1 "}, session=_Session(None))
    assert isinstance(auth, ApiKeyAuth)
    request = _signed(auth, httpx.Request("GET", f"{DEPLOYED}/api/v1/mesh/"))
    assert request.headers["x-api-key"] == "k-1"


def test_gw_auth_3_execute_api_url_is_signed_for_its_region() -> None:
    auth = gateway_auth(DEPLOYED, {}, session=_Session(_credentials("tok")))
    assert isinstance(auth, SigV4Auth)
    request = httpx.Request(
        "POST", f"{DEPLOYED}/api/v1/mesh/", params={"flow": "text-pipeline"}, json={"payload": {"text": "hi"}}
    )
    signed = _signed(auth, request)
    authorization = signed.headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token" in authorization
    assert signed.headers["x-amz-security-token"] == "tok"
    assert len(signed.headers["x-amz-date"]) == 16


def test_signature_covers_the_body() -> None:
    auth = SigV4Auth(region="eu-west-1", credentials=_credentials())
    signatures = set()
    for text in ("a", "b"):
        request = httpx.Request("POST", f"{DEPLOYED}/api/v1/mesh/", json={"payload": text})
        signatures.add(_signed(auth, request).headers["authorization"].rsplit("Signature=", 1)[1])
    assert len(signatures) == 2


def test_custom_domain_signs_with_asya_auth_iam_and_the_env_region() -> None:
    auth = gateway_auth(
        "https://mesh.example.com", {"ASYA_AUTH": "iam", "AWS_REGION": "us-west-2"}, session=_Session(_credentials())
    )
    assert isinstance(auth, SigV4Auth)
    signed = _signed(auth, httpx.Request("GET", "https://mesh.example.com/api/v1/mesh/x"))
    assert "/us-west-2/execute-api/aws4_request" in signed.headers["authorization"]
    assert gateway_auth(DEPLOYED, {"ASYA_AUTH": "none"}, session=_Session(None)) is None


@pytest.mark.parametrize(
    ("url", "env", "session", "message"),
    [
        (DEPLOYED, {}, _Session(None), "needs AWS credentials"),
        ("https://mesh.example.com", {"ASYA_AUTH": "iam"}, _Session(_credentials()), "set AWS_REGION"),
        (DEPLOYED, {"ASYA_AUTH": "sigv5"}, _Session(None), "ASYA_AUTH must be iam or none, got 'sigv5'"),
    ],
)
def test_auth_errors_say_what_to_set(url: str, env: dict[str, str], session: Any, message: str) -> None:
    with pytest.raises(GatewayAuthError, match=message):
        gateway_auth(url, env, session=session)


def test_api_gateway_own_refusal_is_readable() -> None:
    refused = httpx.Response(403, json={"message": "Missing Authentication Token"})
    assert error_message(refused) == "403 Forbidden: Missing Authentication Token"
    assert error_message(httpx.Response(404, json={"error": "not found"})) == "not found"
    assert error_message(httpx.Response(502, text="<html>")) == "502 Bad Gateway"
