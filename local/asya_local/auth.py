"""How the CLI authenticates to a gateway (GW-AUTH-1..7), chosen from the URL and an injectable environment.

:func:`gateway_auth` picks, in this order:

1. env ``ASYA_API_KEY`` set: the header ``X-API-Key: <key>`` (``gateway.auth.mode: api_key``, GW-AUTH-4);
2. a URL on ``execute-api.{region}.amazonaws.com``, or ``ASYA_AUTH=iam`` for a custom domain: AWS Signature V4 for the
   ``execute-api`` service with the default AWS credential chain (profile, env, SSO, instance role), for the default
   ``iam`` mode (GW-AUTH-3). The region comes from the host name, else ``AWS_REGION``/``AWS_DEFAULT_REGION``;
3. otherwise nothing: the local gateway does not check ``iam`` (GW-AUTH-3) and ``none`` checks nothing (GW-AUTH-6).

``ASYA_AUTH=none`` turns signing off. Every request is signed just before it is sent, so a long SSE follow that
reconnects signs each reconnect afresh (credentials are refreshed by botocore).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from typing import Any, Final

import httpx

from asya_local.exceptions import GatewayAuthError

__all__ = ["API_KEY_ENV", "AUTH_ENV", "ApiKeyAuth", "SigV4Auth", "gateway_auth"]

API_KEY_ENV: Final = "ASYA_API_KEY"
AUTH_ENV: Final = "ASYA_AUTH"
_EXECUTE_API_HOST: Final = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
#: Headers that take part in the signature; httpx may add or change others (connection, encoding) afterwards.
_SIGNED_HEADERS: Final = ("host", "content-type")


class ApiKeyAuth(httpx.Auth):
    """``X-API-Key: <key>`` on every request."""

    def __init__(self, key: str) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-API-Key"] = self._key
        yield request


class SigV4Auth(httpx.Auth):
    """AWS Signature V4 for API Gateway (``execute-api``) with botocore's signer."""

    requires_request_body = True

    def __init__(self, *, region: str, credentials: Any) -> None:
        self._region = region
        self._credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth as BotocoreSigner
        from botocore.awsrequest import AWSRequest

        headers = {name: request.headers[name] for name in _SIGNED_HEADERS if name in request.headers}
        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        frozen = self._credentials.get_frozen_credentials()
        BotocoreSigner(frozen, "execute-api", self._region).add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request


def gateway_auth(url: str, env: Mapping[str, str], *, session: Any = None) -> httpx.Auth | None:
    """The authentication for requests to ``url`` (see the module docstring); ``session`` is a ``boto3.Session``
    (built on demand: only IAM signing needs one)."""
    key = env.get(API_KEY_ENV, "").strip()
    if key:
        return ApiKeyAuth(key)
    mode = env.get(AUTH_ENV, "").strip().lower()
    if mode not in ("", "iam", "none"):
        raise GatewayAuthError(f"{AUTH_ENV} must be iam or none, got {mode!r}")
    match = _EXECUTE_API_HOST.match(httpx.URL(url).host)
    if mode == "none" or (mode == "" and match is None):
        return None
    if session is None:
        import boto3

        session = boto3.Session()
    region = match.group(1) if match else env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or session.region_name
    if not region:
        raise GatewayAuthError(f"cannot tell the region of {url} for IAM signing: set AWS_REGION")
    credentials = session.get_credentials()
    if credentials is None:
        raise GatewayAuthError(
            f"{url} needs AWS credentials (gateway.auth.mode iam): configure a profile or set AWS_ACCESS_KEY_ID, "
            f"or set {API_KEY_ENV} for an api_key gateway"
        )
    return SigV4Auth(region=region, credentials=credentials)
