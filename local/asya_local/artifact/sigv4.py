"""SigV4 for the API front: sign a request as a test principal's client does, and verify one.

Both sides use botocore's ``SigV4Auth`` for the canonical request and the signature, so the front checks exactly what
an AWS SDK signs. A verification rebuilds the request with only the headers the client says it signed, signs it with
the secret the access key id maps to, and compares the two signatures in constant time. :func:`verify` answers
``None`` for a valid signature, else API Gateway's error message.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

__all__ = ["ALGORITHM", "sign", "verify"]

ALGORITHM: Final = "AWS4-HMAC-SHA256"
MISSING_TOKEN: Final = "Missing Authentication Token"


def _signed(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    access_key_id: str,
    secret: str,
    region: str,
    service: str,
) -> tuple[SigV4Auth, AWSRequest, str]:
    """botocore's signature of the request carrying exactly ``headers`` (``host`` and ``x-amz-date`` among them).

    The URL is plain http so botocore always hashes the payload, as it does for every execute-api call.
    """
    url = f"http://{headers.get('host', '')}{path or '/'}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method.upper(), url=url, headers=dict(headers), data=body)
    request.context["timestamp"] = headers.get("x-amz-date", "")
    auth = SigV4Auth(Credentials(access_key_id, secret), service, region)
    string_to_sign = auth.string_to_sign(request, auth.canonical_request(request))
    return auth, request, auth.signature(string_to_sign, request)


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
    amz_date = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    signed = {k.lower(): v for k, v in headers.items() if k.lower() == "content-type"}
    signed.update({"host": host, "x-amz-date": amz_date})
    auth, request, signature = _signed(
        method=method,
        path=path,
        query=query,
        headers=signed,
        body=body,
        access_key_id=access_key_id,
        secret=secret,
        region=region,
        service=service,
    )
    authorization = (
        f"{ALGORITHM} Credential={access_key_id}/{auth.credential_scope(request)}, "
        f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}, Signature={signature}"
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
        _, region, service, _ = scope.split("/")
        signed = fields["SignedHeaders"].split(";")
        given = fields["Signature"]
    except (KeyError, ValueError):
        return None, "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters"
    secret = secret_of(access_key_id)
    if secret is None:
        return access_key_id, "The security token included in the request is invalid."
    _, _, expected = _signed(
        method=method,
        path=path,
        query=query,
        headers={name: headers.get(name, "") for name in signed},
        body=body,
        access_key_id=access_key_id,
        secret=secret,
        region=region,
        service=service,
    )
    if not hmac.compare_digest(expected, given):
        return access_key_id, (
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method."
        )
    return access_key_id, None
