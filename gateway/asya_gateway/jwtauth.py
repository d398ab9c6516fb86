"""``jwt`` authentication (GW-AUTH-5): bearer tokens verified by the app against an OIDC issuer's JWKS.

- The client sends ``Authorization: Bearer <JWT>`` (``X-API-Key`` is not read in this mode).
- Accepted algorithms: ``RS256`` and ``ES256`` (:data:`ALGORITHMS`); a token naming another one (``none``, ``HS256``)
  is refused before any key is looked at, so a public key can never serve as an HMAC secret.
- Claims: ``iss`` must equal the manifest's ``issuer``, ``aud`` must be or contain its ``audience``, ``exp`` is
  required and ``nbf``/``iat`` are honoured, all with :data:`LEEWAY_SECONDS` of clock skew. A token without ``aud``
  passes only as a Cognito access token: ``token_use`` ``access`` and ``client_id`` equal to ``audience`` (the app
  client id), as Cognito documents for access tokens (GW-EDGE-3).
- :meth:`JwtAuthenticator.verify` is the one check, synchronous: the app calls it from a worker thread
  (:meth:`JwtAuthenticator.failure`), the edge authorizer Lambda (:mod:`asya_gateway.authorizer`) directly.
  :func:`token_scopes` reads the granted scopes (``scope``, space-separated, or ``scp``, a list).
- Keys (:class:`JwksKeys`): the JWKS at ``jwks_url`` is fetched lazily, cached for ``ttl`` seconds (default 10 min),
  and fetched again at once when a token names a ``kid`` the cached set lacks (the issuer rotated its keys); such
  refetches happen at most once per ``min_refetch`` seconds, so forged ``kid`` values cannot make the gateway hammer
  the issuer. A failed fetch
  keeps the keys it had; with none, every token is refused (fail closed) and the failure is logged.

The verification library is ``joserfc`` (maintained, RFC 7515-7519 complete). Fetching uses the standard library
(``urllib``), run in a worker thread so the event loop never blocks on the issuer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

__all__ = [
    "ALGORITHMS",
    "LEEWAY_SECONDS",
    "JwksKeys",
    "JwtAuthenticator",
    "TokenRefusedError",
    "bearer_token",
    "token_scopes",
]

_log = logging.getLogger("asya_gateway.jwtauth")

ALGORITHMS: Final = ("RS256", "ES256")
LEEWAY_SECONDS: Final = 30
_FETCH_TIMEOUT_SECONDS: Final = 5
_MAX_JWKS_BYTES: Final = 1 << 20
_AUTH_REQUIRED: Final = "authentication required"
_INVALID: Final = "invalid credentials"
#: GW-EDGE-10: every task and MCP session belongs to a subject; a token without one would act as nobody.
_NO_SUBJECT: Final = "invalid credentials: the token has no 'sub' claim (the subject it acts as)"


def _fetch_url(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    # the URL is the manifest's (https, or http on loopback: asya.manifest.GatewayAuth)
    with urllib.request.urlopen(request, timeout=_FETCH_TIMEOUT_SECONDS) as response:
        body: bytes = response.read(_MAX_JWKS_BYTES + 1)
    if len(body) > _MAX_JWKS_BYTES:
        raise ValueError(f"JWKS at {url} is larger than {_MAX_JWKS_BYTES} bytes")
    return body


class JwksKeys:
    """The issuer's key set, cached; thread-safe. ``fetch`` and ``clock`` are injectable for tests."""

    def __init__(
        self,
        url: str,
        *,
        ttl: float = 600.0,
        min_refetch: float = 30.0,
        fetch: Callable[[str], bytes] = _fetch_url,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._ttl = ttl
        self._min_refetch = min_refetch
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._kids: frozenset[str | None] = frozenset()
        self._fetched_at = float("-inf")
        self._unknown_at = float("-inf")

    def key_set(self, kid: str | None) -> KeySet | None:
        """The key set to verify a token naming ``kid``; refetched when stale or when ``kid`` is unknown."""
        with self._lock:
            now = self._clock()
            age = now - self._fetched_at
            # no keys yet (a failed fetch): retried at the refetch pace, not once per request
            stale = age >= self._ttl or (self._keys is None and age >= self._min_refetch)
            unknown = (
                not stale
                and self._keys is not None
                and kid not in self._kids
                and now - self._unknown_at >= self._min_refetch
            )
            if unknown:
                self._unknown_at = now
            if stale or unknown:
                self._refresh(now)
            return self._keys

    def _refresh(self, now: float) -> None:
        self._fetched_at = now
        try:
            keys = KeySet.import_key_set(json.loads(self._fetch(self._url)))
        except (OSError, ValueError, JoseError) as exc:
            _log.error(
                "cannot fetch the JWKS at %s (keeping %s): %s",
                self._url,
                "no keys" if not self._kids else "the cached keys",
                exc,
            )
            return
        self._keys = keys
        self._kids = frozenset(key.kid for key in keys.keys)


def bearer_token(headers: Headers) -> str | None:
    return bearer_of(headers.get("authorization", ""))


def bearer_of(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; ``None`` for another scheme or none."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def token_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: OAuth's ``scope`` (space-separated; Cognito, Auth0) or ``scp`` (a list; Okta)."""
    granted: set[str] = set()
    scope = claims.get("scope")
    if isinstance(scope, str):
        granted.update(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, str):
        granted.update(scp.split())
    elif isinstance(scp, list):
        granted.update(item for item in scp if isinstance(item, str))
    return frozenset(granted)


class TokenRefusedError(Exception):
    """A bearer token that does not verify; ``str(error)`` is the 401 message: ``invalid credentials``, with no hint at
    why, except for a signed token without a ``sub`` claim (GW-EDGE-10), which names it."""


class JwtAuthenticator:
    """Verifies ``Authorization: Bearer`` JWTs (module docstring)."""

    def __init__(
        self,
        keys: JwksKeys,
        *,
        issuer: str,
        audience: str,
        algorithms: Collection[str] = ALGORITHMS,
        leeway: int = LEEWAY_SECONDS,
        now: Callable[[], int] | None = None,
    ) -> None:
        self._keys = keys
        self._audience = audience
        self._algorithms = list(algorithms)
        self._registry = jwt.JWTClaimsRegistry(
            now=now,
            leeway=leeway,
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
        )
        # Cognito access tokens carry no aud: their client_id is checked instead (module docstring)
        self._access_registry = jwt.JWTClaimsRegistry(
            now=now,
            leeway=leeway,
            iss={"essential": True, "value": issuer},
            exp={"essential": True},
            token_use={"essential": True, "value": "access"},
            client_id={"essential": True, "value": audience},
        )

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; raises :class:`TokenRefusedError`. May fetch the JWKS (blocking)."""
        try:
            header = jws.extract_compact(token.encode("ascii")).protected
        except (JoseError, ValueError, UnicodeEncodeError):
            raise TokenRefusedError(_INVALID) from None
        if header.get("alg") not in self._algorithms:
            raise TokenRefusedError(_INVALID)
        kid = header.get("kid")
        key_set = self._keys.key_set(kid if isinstance(kid, str) else None)
        if key_set is None:
            raise TokenRefusedError(_INVALID)
        try:
            decoded = jwt.decode(token, key_set, algorithms=self._algorithms)
            subject = decoded.claims.get("sub")
            if not isinstance(subject, str) or not subject:  # signed by the issuer: naming what is missing is safe
                raise TokenRefusedError(_NO_SUBJECT)
            registry = self._registry if "aud" in decoded.claims else self._access_registry
            registry.validate(decoded.claims)
        except (JoseError, ValueError):
            raise TokenRefusedError(_INVALID) from None
        return dict(decoded.claims)

    async def authenticate(self, headers: Headers) -> tuple[str | None, dict[str, Any] | None]:
        """(the 401 message, ``None``) or (``None``, the claims)."""
        token = bearer_token(headers)
        if token is None:
            return _AUTH_REQUIRED, None
        try:
            return None, await run_in_threadpool(self.verify, token)
        except TokenRefusedError as exc:
            return str(exc), None

    async def failure(self, headers: Headers) -> str | None:
        message, _ = await self.authenticate(headers)
        return message
