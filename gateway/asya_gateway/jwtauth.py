"""``jwt`` authentication (GATEWAY GW-AUTH-5): bearer tokens verified by the app against an OIDC issuer's JWKS.

- The client sends ``Authorization: Bearer <JWT>`` (``X-API-Key`` is not read in this mode).
- Accepted algorithms: ``RS256`` and ``ES256`` (:data:`ALGORITHMS`); a token naming another one (``none``, ``HS256``)
  is refused before any key is looked at, so a public key can never serve as an HMAC secret.
- Claims: ``iss`` must equal the manifest's ``issuer``, ``aud`` must be or contain its ``audience``, ``exp`` is
  required and ``nbf``/``iat`` are honoured, all with :data:`LEEWAY_SECONDS` of clock skew.
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
from collections.abc import Callable, Collection
from typing import Final

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

__all__ = ["ALGORITHMS", "LEEWAY_SECONDS", "JwksKeys", "JwtAuthenticator", "bearer_token"]

_log = logging.getLogger("asya_gateway.jwtauth")

ALGORITHMS: Final = ("RS256", "ES256")
LEEWAY_SECONDS: Final = 30
_FETCH_TIMEOUT_SECONDS: Final = 5
_MAX_JWKS_BYTES: Final = 1 << 20
_AUTH_REQUIRED: Final = "authentication required"
_INVALID: Final = "invalid credentials"


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
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


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
        self._algorithms = list(algorithms)
        self._registry = jwt.JWTClaimsRegistry(
            now=now,
            leeway=leeway,
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
        )

    async def failure(self, headers: Headers) -> str | None:
        token = bearer_token(headers)
        if token is None:
            return _AUTH_REQUIRED
        try:
            header = jws.extract_compact(token.encode("ascii")).protected
        except (JoseError, ValueError, UnicodeEncodeError):
            return _INVALID
        if header.get("alg") not in self._algorithms:
            return _INVALID
        kid = header.get("kid")
        key_set = await run_in_threadpool(self._keys.key_set, kid if isinstance(kid, str) else None)
        if key_set is None:
            return _INVALID
        try:
            decoded = jwt.decode(token, key_set, algorithms=self._algorithms)
            self._registry.validate(decoded.claims)
        except (JoseError, ValueError):
            return _INVALID
        return None
