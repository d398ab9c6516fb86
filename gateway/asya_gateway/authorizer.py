"""The edge authorizer (GW-EDGE-1, GW-EDGE-2): the Lambda API Gateway invokes before a non-public method under
``gateway.auth.mode`` ``api_key`` or ``jwt``, so an unauthenticated request never reaches the gateway function.

It runs the gateway's own checks, one implementation for the app and the edge: :mod:`asya_gateway.jwtauth` for tokens
and :func:`asya_gateway.auth.key_matches` for keys, with the keys and the JWKS read and cached as the app reads them
(:func:`~asya_gateway.auth.api_key_source`, :func:`~asya_gateway.auth.reporter_key_source`).

Events (API Gateway's authorizer input):

- ``TOKEN`` (``jwt``; identity source ``Authorization``): ``authorizationToken`` is ``Bearer <JWT>``.
- ``REQUEST`` (``api_key``; identity source ``X-API-Key``): the key is that header.
- ``REQUEST`` on the producer route ``POST /api/v1/mesh/{task_id}/events`` (every mode but ``iam``; identity source
  ``X-Asya-Reporter-Key``): the reporter key (GW-EVT-1), never a client's credential.

A credential that passes gets an ``Allow`` policy for every method of the stage (API Gateway caches it per
credential for ``gateway.auth.authorizer_cache_seconds`` and reuses it on other methods), or for the producer route
only for a reporter key; the principal is the token's ``sub`` (``api-key`` / ``reporter`` for keys) and the context
carries ``sub`` and ``scope``. Anything else raises :class:`UnauthorizedError` (message ``Unauthorized``), which API
Gateway answers with 401 ``{"message": "Unauthorized"}`` without calling the method.

Environment: the gateway's (:class:`asya_gateway.config.GatewayConfig`: ``ASYA_MANIFEST``, ``ASYA_API_KEYS``,
``ASYA_REPORTER_KEY_SECRET``, ...). The checker is built on the first invocation and kept for the warm environment.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from asya.manifest import GatewayAuth, Manifest, load_manifest
from asya_gateway.auth import (
    KeySource,
    api_key_source,
    is_producer_route,
    jwt_authenticator,
    key_matches,
    reporter_key_source,
)
from asya_gateway.config import GatewayConfig
from asya_gateway.jwtauth import JwtAuthenticator, TokenRefusedError, bearer_of, token_scopes

__all__ = ["EdgeAuthorizer", "UnauthorizedError", "handler", "method_route", "reset"]

#: API Gateway answers 401 only to an authorizer error with exactly this message.
_UNAUTHORIZED: Final = "Unauthorized"


class UnauthorizedError(Exception):
    """Refuse the request with API Gateway's 401."""

    def __init__(self) -> None:
        super().__init__(_UNAUTHORIZED)


@dataclass(frozen=True, slots=True)
class _Route:
    api_arn: str  # arn:...:execute-api:REGION:ACCOUNT:API_ID/STAGE
    method: str
    path: str


def method_route(method_arn: str) -> _Route:
    """``arn:aws:execute-api:R:A:API/STAGE/METHOD/a/b`` split into the stage's ARN, the method and ``/a/b``."""
    head, _, resource = method_arn.rpartition(":")
    parts = resource.split("/", 3)
    if not head or len(parts) < 3:
        raise UnauthorizedError()
    return _Route(f"{head}:{parts[0]}/{parts[1]}", parts[2], "/" + (parts[3] if len(parts) > 3 else ""))


def _policy(principal: str, resource: str, context: Mapping[str, str]) -> dict[str, Any]:
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}],
        },
        "context": dict(context),
    }


class EdgeAuthorizer:
    """Decides one authorizer event (module docstring). Sources and the JWT checker are injectable for tests."""

    def __init__(
        self,
        auth: GatewayAuth,
        *,
        keys: KeySource | None = None,
        reporter_keys: KeySource,
        tokens: JwtAuthenticator | None = None,
    ) -> None:
        self._auth = auth
        self._keys = keys
        self._reporter_keys = reporter_keys
        self._tokens = tokens

    @classmethod
    def from_config(cls, manifest: Manifest, config: GatewayConfig) -> EdgeAuthorizer:
        auth = manifest.gateway.auth
        return cls(
            auth,
            keys=api_key_source(auth, config) if auth.mode == "api_key" else None,
            reporter_keys=reporter_key_source(config),
            tokens=jwt_authenticator(auth) if auth.mode == "jwt" else None,
        )

    def decide(self, event: Mapping[str, Any]) -> dict[str, Any]:
        route = method_route(str(event.get("methodArn", "")))
        if event.get("type") == "TOKEN":
            return self._token(str(event.get("authorizationToken") or ""), route)
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        if is_producer_route(route.method, route.path):
            credential = headers.get("x-asya-reporter-key", "")
            if not credential or not key_matches(credential, self._reporter_keys.keys()):
                raise UnauthorizedError()
            # the reporter's policy covers the producer route only, whatever else the cache is asked for
            return _policy("reporter", f"{route.api_arn}/POST/api/v1/mesh/*/events", {"sub": "reporter"})
        if self._auth.mode == "jwt":
            return self._token(headers.get("authorization", ""), route)
        if self._keys is None:
            raise UnauthorizedError()
        credential = headers.get("x-api-key") or bearer_of(headers.get("authorization", "")) or ""
        if not credential or not key_matches(credential, self._keys.keys()):
            raise UnauthorizedError()
        return _policy("api-key", f"{route.api_arn}/*/*", {"sub": "api-key"})

    def _token(self, authorization: str, route: _Route) -> dict[str, Any]:
        token = bearer_of(authorization)
        if token is None or self._tokens is None:
            raise UnauthorizedError()
        try:
            claims = self._tokens.verify(token)
        except TokenRefusedError:
            raise UnauthorizedError() from None
        subject = str(claims["sub"])  # verify refuses a token without one (GW-EDGE-10)
        scope = " ".join(sorted(token_scopes(claims)))
        return _policy(subject, f"{route.api_arn}/*/*", {"sub": subject, "scope": scope})


class _Current:
    """The checker built from the environment on the first invocation, kept for the warm environment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._authorizer: EdgeAuthorizer | None = None

    def get(self) -> EdgeAuthorizer:
        with self._lock:
            if self._authorizer is None:
                config = GatewayConfig.from_env()
                self._authorizer = EdgeAuthorizer.from_config(load_manifest(config.manifest_path), config)
            return self._authorizer

    def reset(self) -> None:
        with self._lock:
            self._authorizer = None


_CURRENT: Final = _Current()


def reset() -> None:
    """Forget the checker built from the environment (tests)."""
    _CURRENT.reset()


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point (``asya_gateway.authorizer.handler``)."""
    return _CURRENT.get().decide(event)
