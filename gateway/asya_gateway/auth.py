"""Authentication of the non-public routes (GW-AUTH-1..7).

Modes (manifest ``gateway.auth.mode``, GW-AUTH-1):

- ``iam``: API Gateway enforces SigV4 before the request reaches the app (GW-AUTH-3); the app checks nothing. The
  local mode logs a warning at start that nothing is enforced.
- ``none``: no check (GW-AUTH-6).
- ``api_key`` (GW-AUTH-4): the client sends ``X-API-Key: <key>`` or ``Authorization: Bearer <key>``; valid keys come
  from env ``ASYA_API_KEYS`` when set (local mode), else from the Secrets Manager secret ``api_key_secret`` (a string,
  or a JSON array of strings), read lazily and cached for at most 5 min. Keys are compared in constant time.
- ``jwt`` (GW-AUTH-5): ``Authorization: Bearer <JWT>`` verified against the manifest's ``jwks_url``, ``issuer`` and
  ``audience`` (RS256, ES256; JWKS cached, refetched on an unknown ``kid``): :mod:`asya_gateway.jwtauth`.

The producer route ``POST /api/v1/mesh/{id}/events`` (GW-EVT-1) is for reporters only, in every mode: it takes
``X-Asya-Reporter-Key: <reporter key>`` and never a client's key or token. Reporter keys come from env
``ASYA_REPORTER_KEYS`` (local mode) or the Secrets Manager secret named by ``ASYA_REPORTER_KEY_SECRET`` (cached like
the API keys); with neither, the route answers 401 to everyone. A request without the header answers 401
``{"error": "reporter credential required: send X-Asya-Reporter-Key"}``, a wrong key ``invalid credentials``. Under
``iam`` in AWS, API Gateway's SigV4 check applies first, as on every route.

Public routes (GW-AUTH-2): ``GET /health``, ``GET /openapi.json``, ``GET /.well-known/agent.json`` and its A2A 1.x
path ``/.well-known/agent-card.json``, and the web console's static assets under ``/console`` (they hold no data;
the page then calls the API with the user's credentials, :mod:`asya_gateway.webconsole`). Failures answer
401 ``{"error": "authentication required"}`` (no credentials) or ``{"error": "invalid credentials"}`` with
``WWW-Authenticate: Bearer realm="asya-gateway"``; under ``/a2a`` the body is the JSON-RPC error -32005 (GW-AUTH-7).
"""

from __future__ import annotations

import hmac
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any, Final, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from asya import publicroutes
from asya.manifest import GatewayAuth
from asya_gateway.config import GatewayConfig, parse_key_array
from asya_gateway.jwtauth import JwksKeys, JwtAuthenticator
from asya_gateway.principal import bind_claims
from asya_gateway.webconsole import is_console_path

__all__ = [
    "PUBLIC_PATHS",
    "REPORTER_KEY_HEADER",
    "ApiKeyAuthenticator",
    "AuthMiddleware",
    "Authenticator",
    "KeySource",
    "ReporterAuthenticator",
    "SecretsManagerKeys",
    "StaticKeys",
    "api_key_source",
    "build_authenticator",
    "build_reporter_authenticator",
    "extract_credential",
    "is_producer_route",
    "jwt_authenticator",
    "key_matches",
    "reporter_key_source",
]

_log = logging.getLogger("asya_gateway.auth")

PUBLIC_PATHS: Final = frozenset(publicroutes.PUBLIC_PATHS)
AUTH_REQUIRED: Final = "authentication required"
INVALID_CREDENTIALS: Final = "invalid credentials"
_CHALLENGE: Final = {"WWW-Authenticate": 'Bearer realm="asya-gateway"'}
REPORTER_KEY_HEADER: Final = publicroutes.REPORTER_KEY_HEADER
REPORTER_REQUIRED: Final = f"reporter credential required: send {REPORTER_KEY_HEADER}"
_PRODUCER_ROUTE: Final = re.compile(r"^/api/v1/mesh/[^/]+/events$")


class KeySource(Protocol):
    def keys(self) -> tuple[str, ...]:
        """The valid keys; may block (called in a worker thread)."""
        ...


class StaticKeys:
    """Keys given at start (``ASYA_API_KEYS``)."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = tuple(keys)

    def keys(self) -> tuple[str, ...]:
        return self._keys


class SecretsManagerKeys:
    """Keys from a Secrets Manager secret (a string, or a JSON array of strings), cached for ``ttl`` seconds.

    Powertools Parameters' ``SecretsProvider`` reads and caches the secret; it is built on the first read, over the
    injected client or a default one, so constructing this object touches no AWS client.
    """

    def __init__(self, secret_id: str, *, client: Any = None, ttl: float = 300.0) -> None:
        self._secret_id = secret_id
        self._client = client
        self._max_age = max(0, int(ttl))
        self._provider: Any = None
        self._lock = threading.Lock()

    def keys(self) -> tuple[str, ...]:
        with self._lock:
            if self._provider is None:
                from aws_lambda_powertools.utilities.parameters import SecretsProvider

                if self._client is None:
                    from asya.awsclients import GATEWAY_BUDGET, aws_client

                    self._client = aws_client("secretsmanager", GATEWAY_BUDGET)
                self._provider = SecretsProvider(boto3_client=self._client)
            secret = self._provider.get(self._secret_id, max_age=self._max_age)
        if not isinstance(secret, str):
            raise TypeError(f"secret {self._secret_id!r} (gateway.auth.api_key_secret) is binary, expected a string")
        keys = parse_key_array(secret, what=f"secret {self._secret_id!r} (gateway.auth.api_key_secret)")
        if keys is not None:
            return keys
        return (secret,) if secret else ()


def extract_credential(headers: Headers) -> str | None:
    """``X-API-Key`` wins over ``Authorization: Bearer``; ``None`` when neither is present."""
    api_key = headers.get("x-api-key")
    if api_key:
        return api_key
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


class Authenticator(Protocol):
    async def failure(self, headers: Headers) -> str | None:
        """``None`` when the request may proceed, else the 401 message."""
        ...


class _NoCheck:
    async def failure(self, headers: Headers) -> str | None:
        return None


class ApiKeyAuthenticator:
    def __init__(self, source: KeySource) -> None:
        self._source = source

    async def failure(self, headers: Headers) -> str | None:
        credential = extract_credential(headers)
        if credential is None:
            return AUTH_REQUIRED
        return await _key_failure(credential, self._source)


class ReporterAuthenticator:
    """GW-EVT-1: the producer route's check, ``X-Asya-Reporter-Key`` against the reporter keys only."""

    def __init__(self, source: KeySource) -> None:
        self._source = source

    async def failure(self, headers: Headers) -> str | None:
        credential = headers.get(REPORTER_KEY_HEADER.lower())
        if not credential:
            return REPORTER_REQUIRED
        return await _key_failure(credential, self._source)


def is_producer_route(method: str, path: str) -> bool:
    return method == "POST" and _PRODUCER_ROUTE.match(path) is not None


def build_reporter_authenticator(config: GatewayConfig, *, secretsmanager: Any = None) -> ReporterAuthenticator:
    """The producer route's authenticator: no key configured means no reporter is accepted."""
    return ReporterAuthenticator(reporter_key_source(config, secretsmanager=secretsmanager))


async def _key_failure(credential: str, source: KeySource) -> str | None:
    keys = await run_in_threadpool(source.keys)
    return None if key_matches(credential, keys) else INVALID_CREDENTIALS


def key_matches(credential: str, keys: Sequence[str]) -> bool:
    """Whether ``credential`` is one of ``keys``, compared in constant time."""
    given = credential.encode("utf-8")
    matched = False
    for key in keys:
        # No early exit: the time taken does not tell which key (or how much of one) matched.
        matched |= hmac.compare_digest(given, key.encode("utf-8"))
    return matched


def api_key_source(auth: GatewayAuth, config: GatewayConfig, *, secretsmanager: Any = None) -> KeySource:
    """The client keys of ``api_key`` mode: ``ASYA_API_KEYS`` when set, else the manifest's secret."""
    if config.api_keys is not None:
        return StaticKeys(config.api_keys)
    assert auth.api_key_secret is not None  # the manifest model requires it for api_key
    return SecretsManagerKeys(auth.api_key_secret, client=secretsmanager, ttl=config.api_key_cache_seconds)


def reporter_key_source(config: GatewayConfig, *, secretsmanager: Any = None) -> KeySource:
    """The reporter keys (GW-EVT-1): none configured means no reporter is accepted."""
    if config.reporter_keys is not None:
        return StaticKeys(config.reporter_keys)
    if config.reporter_key_secret:
        return SecretsManagerKeys(config.reporter_key_secret, client=secretsmanager, ttl=config.api_key_cache_seconds)
    return StaticKeys(())


def jwt_authenticator(auth: GatewayAuth) -> JwtAuthenticator:
    # the manifest model requires all three for jwt
    assert auth.jwks_url is not None and auth.issuer is not None and auth.audience is not None
    return JwtAuthenticator(JwksKeys(auth.jwks_url), issuer=auth.issuer, audience=auth.audience)


def build_authenticator(auth: GatewayAuth, config: GatewayConfig, *, secretsmanager: Any = None) -> Authenticator:
    """The authenticator of the manifest's mode."""
    if auth.mode == "api_key":
        return ApiKeyAuthenticator(api_key_source(auth, config, secretsmanager=secretsmanager))
    if auth.mode == "jwt":
        return jwt_authenticator(auth)
    if auth.mode == "iam" and not config.in_lambda:
        _log.warning("gateway.auth.mode is 'iam': requests are not authenticated outside API Gateway (local mode)")
    return _NoCheck()


class AuthMiddleware:
    """Applies the client authenticator to every non-public route, and the reporter one to the producer route."""

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator, reporter: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator
        self.reporter = reporter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS or is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        checker = self.reporter if is_producer_route(scope["method"], scope["path"]) else self.authenticator
        if isinstance(checker, JwtAuthenticator):
            message, claims = await checker.authenticate(Headers(scope=scope))
            bind_claims(claims)
        else:
            message = await checker.failure(Headers(scope=scope))
        if message is None:
            await self.app(scope, receive, send)
            return
        body: dict[str, Any]
        if scope["path"].startswith("/a2a"):
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32005, "message": "Authentication required"}}
        else:
            body = {"error": message}
        await JSONResponse(body, status_code=401, headers=_CHALLENGE)(scope, receive, send)
