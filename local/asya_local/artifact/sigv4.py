"""SigV4 for the API front: sign a request as botocore does (a test principal's client), and verify one.

Both sides build the canonical request the same way botocore's ``SigV4Auth`` does for non-S3 services: the path as
sent, quoted with ``/~`` safe; the query pairs sorted as sent; the signed headers' values trimmed; the payload's
sha256. :func:`verify` answers ``None`` for a valid signature, else API Gateway's error message.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote

__all__ = ["ALGORITHM", "sign", "verify"]

ALGORITHM: Final = "AWS4-HMAC-SHA256"
MISSING_TOKEN: Final = "Missing Authentication Token"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical(
    *, method: str, path: str, query: str, headers: Mapping[str, str], signed: list[str], body: bytes
) -> str:
    pairs = sorted(tuple(pair.partition("=")[::2]) for pair in query.split("&")) if query else []
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    lines = [f"{name}:{' '.join(headers.get(name, '').split())}" for name in signed]
    return "\n".join(
        [
            method.upper(),
            quote(path or "/", safe="/~"),
            canonical_query,
            "\n".join(lines) + "\n",
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )


def _signature(secret: str, amz_date: str, scope: str, canonical: str) -> str:
    date, region, service, _ = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), date), region), service), "aws4_request")
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def sign(
    *,
    method: str,
    host: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    access_key_id: str,
    secret: str,
    region: str,
    service: str = "execute-api",
    now: datetime | None = None,
) -> dict[str, str]:
    """The headers to add to the request: ``host``, ``x-amz-date`` and ``authorization``."""
    moment = now or datetime.now(UTC)
    amz_date = moment.strftime("%Y%m%dT%H%M%SZ")
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    all_headers = {k.lower(): v for k, v in headers.items()}
    all_headers.update({"host": host, "x-amz-date": amz_date})
    signed = sorted({"host", "x-amz-date", *(k for k in all_headers if k == "content-type")})
    canonical = _canonical(method=method, path=path, query=query, headers=all_headers, signed=signed, body=body)
    signature = _signature(secret, amz_date, scope, canonical)
    authorization = (
        f"{ALGORITHM} Credential={access_key_id}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return {"host": host, "x-amz-date": amz_date, "authorization": authorization}


def verify(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    secret_of: Callable[[str], str | None],
) -> tuple[str | None, str | None]:
    """``(access_key_id, None)`` when the request's signature is valid, else ``(access_key_id or None, message)``."""
    authorization = headers.get("authorization", "")
    if not authorization.startswith(ALGORITHM + " "):
        return None, MISSING_TOKEN
    fields = dict(
        part.strip().split("=", 1) for part in authorization.removeprefix(ALGORITHM).split(",") if "=" in part
    )
    try:
        access_key_id, scope = fields["Credential"].split("/", 1)
        signed = fields["SignedHeaders"].split(";")
        given = fields["Signature"]
    except (KeyError, ValueError):
        return None, "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters"
    secret = secret_of(access_key_id)
    if secret is None:
        return access_key_id, "The security token included in the request is invalid."
    amz_date = headers.get("x-amz-date", "")
    canonical = _canonical(method=method, path=path, query=query, headers=headers, signed=signed, body=body)
    if not hmac.compare_digest(_signature(secret, amz_date, scope, canonical), given):
        return access_key_id, (
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method."
        )
    return access_key_id, None
