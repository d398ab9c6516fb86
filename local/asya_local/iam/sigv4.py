"""Who signed a request, from its SigV4 credential: the access key id and the credential scope.

A signed request names its credential either in the ``Authorization`` header
(``AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=..., Signature=...``) or, for a
presigned URL, in the ``X-Amz-Credential`` query parameter (``AKID/20260101/us-east-1/s3/aws4_request``). S3 still
accepts SigV2 (``Authorization: AWS AKID:signature``, and the ``AWSAccessKeyId`` query parameter botocore's
``generate_presigned_url`` writes by default); those carry no scope, and only S3 takes them, so they are S3's. The
signature itself is not verified: moto does not verify it either, and the proxy only needs to tell principals apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

__all__ = ["Credential", "credential_of"]

_ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True, slots=True)
class Credential:
    """The signer's access key id and the scope it signed for; ``presigned`` when it came from the query string."""

    access_key_id: str
    region: str
    service: str
    presigned: bool
    #: S3's ``s3:signatureversion``: ``AWS4-HMAC-SHA256`` or ``AWS`` (SigV2).
    signature_version: str = "AWS4-HMAC-SHA256"


def _parse_scope(value: str, presigned: bool) -> Credential | None:
    parts = value.split("/")
    if len(parts) != 5 or not parts[0] or parts[4] != "aws4_request":
        return None
    return Credential(access_key_id=parts[0], region=parts[2], service=parts[3], presigned=presigned)


def credential_of(headers: Mapping[str, str], url: str) -> Credential | None:
    """The SigV4 credential of a request (``headers`` with lower-case names), or ``None`` when it is not signed."""
    authorization = headers.get("authorization", "")
    if authorization.startswith(_ALGORITHM):
        for field in authorization[len(_ALGORITHM) :].split(","):
            name, _, value = field.strip().partition("=")
            if name == "Credential":
                return _parse_scope(value.strip(), presigned=False)
        return None
    if authorization.startswith("AWS "):
        access_key, _, _ = authorization[4:].partition(":")
        if not access_key:
            return None
        return Credential(access_key_id=access_key, region="", service="s3", presigned=False, signature_version="AWS")
    query = parse_qs(urlsplit(url).query)
    if query.get("X-Amz-Algorithm") == [_ALGORITHM] and query.get("X-Amz-Credential"):
        return _parse_scope(query["X-Amz-Credential"][0], presigned=True)
    if query.get("AWSAccessKeyId") and query.get("Signature"):
        access_key = query["AWSAccessKeyId"][0]
        return Credential(access_key_id=access_key, region="", service="s3", presigned=True, signature_version="AWS")
    return None
