"""What IAM checks for one S3 REST request (path-style or virtual-hosted), as AWS documents per operation.

- Bucket and key: virtual-hosted when the host is ``<bucket>.s3[.<region>].amazonaws.com`` or ``<bucket>.localhost``,
  else path-style (``/<bucket>/<key>``). The key is URL-decoded.
- Objects (``arn:aws:s3:::<bucket>/<key>``): ``GetObject`` and ``HeadObject`` -> ``s3:GetObject`` (with ``versionId``:
  ``s3:GetObjectVersion``); ``PutObject``, ``UploadPart``, ``CreateMultipartUpload``, ``CompleteMultipartUpload``
  -> ``s3:PutObject``; ``CopyObject`` and ``UploadPartCopy`` -> ``s3:GetObject`` on the source and ``s3:PutObject``
  on the destination; ``DeleteObject`` -> ``s3:DeleteObject``; ``AbortMultipartUpload``, ``ListParts``
  (``s3:ListMultipartUploadParts``), the object ``tagging`` and ``acl`` subresources.
- Buckets (``arn:aws:s3:::<bucket>``): ``ListObjectsV2``, ``ListObjects`` and ``HeadBucket`` -> ``s3:ListBucket``
  with ``s3:prefix``, ``s3:delimiter`` and ``s3:max-keys`` in the context when the request sends them (so a
  ``HeadBucket`` carries no ``s3:prefix``); ``DeleteObjects`` -> ``s3:DeleteObject`` on every listed key (all must be
  allowed: AWS would instead answer each key apart inside a 200); the configuration subresources the mesh provisions
  with (``encryption``, ``lifecycle``, ``publicAccessBlock``, ``policy``, ...); ``CreateBucket``, ``DeleteBucket``.
- Every check carries ``s3:authType`` (``REST-HEADER`` or ``REST-QUERY-STRING``) and ``s3:signatureversion``; an
  object write carries the ``s3:x-amz-*`` header keys it sends (``acl``, ``server-side-encryption``, ...).
- Anything else (an unknown subresource, a malformed copy source, ``DeleteObjects`` with an unreadable body) is
  ``None``: unmodelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Protocol
from urllib.parse import parse_qs, unquote, urlsplit
from xml.etree import ElementTree

from asya_local.iam.model import ContextDict, RequestContext
from asya_local.iam.sigv4 import Credential

__all__ = ["s3_checks"]

_VIRTUAL_HOST: Final = re.compile(r"^(?P<bucket>[^/]+?)\.(?:s3[.-][^/]*amazonaws\.com|s3\.amazonaws\.com|localhost)$")
#: Query parameters that name no subresource: listing, botocore's ``x-id``, presigning (and ``X-Amz-*``).
_PLAIN_PARAMS: Final = frozenset(
    {"list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after", "encoding-type"}
    | {"fetch-owner", "marker", "x-id", "versionId", "partNumber", "AWSAccessKeyId", "Signature", "Expires"}
)
_LIST_KEYS: Final = (("prefix", "s3:prefix"), ("delimiter", "s3:delimiter"), ("max-keys", "s3:max-keys"))
_BUCKET_GET: Final = {
    "versions": "ListBucketVersions",
    "uploads": "ListBucketMultipartUploads",
    "location": "GetBucketLocation",
    "policy": "GetBucketPolicy",
    "encryption": "GetEncryptionConfiguration",
    "lifecycle": "GetLifecycleConfiguration",
    "publicAccessBlock": "GetBucketPublicAccessBlock",
    "versioning": "GetBucketVersioning",
    "tagging": "GetBucketTagging",
    "cors": "GetBucketCORS",
    "notification": "GetBucketNotification",
    "acl": "GetBucketAcl",
}
_BUCKET_PUT: Final = {
    "policy": "PutBucketPolicy",
    "encryption": "PutEncryptionConfiguration",
    "lifecycle": "PutLifecycleConfiguration",
    "publicAccessBlock": "PutBucketPublicAccessBlock",
    "versioning": "PutBucketVersioning",
    "tagging": "PutBucketTagging",
    "cors": "PutBucketCORS",
    "notification": "PutBucketNotification",
    "acl": "PutBucketAcl",
}
#: Deleting a bucket configuration is authorized by the action that writes it (DeleteBucketPolicy excepted).
_BUCKET_DELETE: Final = {**{name: _BUCKET_PUT[name] for name in _BUCKET_PUT}, "policy": "DeleteBucketPolicy"}
_WRITE_HEADERS: Final = (
    "x-amz-acl",
    "x-amz-server-side-encryption",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-storage-class",
    "x-amz-copy-source",
    "x-amz-metadata-directive",
)


class _Check(Protocol):
    def __call__(self, action: str, resources: list[str], operation: str, **extra: str) -> RequestContext: ...


def _bucket_and_key(url: str, headers: Mapping[str, str]) -> tuple[str, str]:
    parts = urlsplit(url)
    host = (headers.get("host") or parts.netloc).rsplit(":", 1)[0].lower()
    path = unquote(parts.path)
    virtual = _VIRTUAL_HOST.match(host)
    if virtual is not None:
        return virtual["bucket"], path.lstrip("/")
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


def _copy_source(headers: Mapping[str, str]) -> tuple[str, bool] | None:
    """The source object ARN of a copy, and whether it names a version; ``None`` when unreadable."""
    raw = headers["x-amz-copy-source"]
    path, _, query = raw.partition("?")
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if not bucket or not key or bucket.startswith("arn:"):
        return None
    return f"arn:aws:s3:::{bucket}/{key}", "versionId" in parse_qs(query)


def _deleted_objects(body: bytes, bucket_arn: str) -> list[tuple[str, bool]] | None:
    try:
        root = ElementTree.fromstring(body)  # the local mesh's own request body
    except ElementTree.ParseError:
        return None
    found: list[tuple[str, bool]] = []
    for element in root:
        if element.tag.rsplit("}", 1)[-1] != "Object":
            continue
        children = {child.tag.rsplit("}", 1)[-1]: child.text or "" for child in element}
        if not children.get("Key"):
            return None
        found.append((f"{bucket_arn}/{children['Key']}", "VersionId" in children))
    return found or None


def s3_checks(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    context: ContextDict,
    credential: Credential | None,
) -> list[RequestContext] | None:
    """The checks for one S3 request (``headers`` with lower-case names), or ``None`` when it is not modelled."""
    base = dict(context)
    if credential is not None:
        base["s3:authType"] = "REST-QUERY-STRING" if credential.presigned else "REST-HEADER"
        base["s3:signatureversion"] = credential.signature_version
    query = parse_qs(urlsplit(url).query, keep_blank_values=True)
    params = {name: values[0] for name, values in query.items() if not name.startswith(("X-Amz-", "response-"))}
    subresources = sorted(set(params) - _PLAIN_PARAMS)
    bucket, key = _bucket_and_key(url, headers)

    def check(action: str, resources: list[str], operation: str, **extra: str) -> RequestContext:
        return RequestContext("s3", f"s3:{action}", tuple(resources), {**base, **extra}, operation)

    if not bucket:
        return [check("ListAllMyBuckets", ["*"], "ListBuckets")] if method == "GET" and not subresources else None
    bucket_arn = f"arn:aws:s3:::{bucket}"
    if key:
        return _object_checks(method, headers, params, subresources, arn=f"{bucket_arn}/{key}", check=check)
    return _bucket_checks(method, body, params, subresources, arn=bucket_arn, check=check)


def _bucket_checks(
    method: str, body: bytes, params: dict[str, str], subresources: list[str], *, arn: str, check: _Check
) -> list[RequestContext] | None:
    if len(subresources) > 1:
        return None
    sub = subresources[0] if subresources else None
    listing = {name: params[param] for param, name in _LIST_KEYS if param in params}
    if method == "HEAD" and sub is None:
        return [check("ListBucket", [arn], "HeadBucket")]
    if method == "GET":
        if sub is None:
            operation = "ListObjectsV2" if params.get("list-type") == "2" else "ListObjects"
            return [check("ListBucket", [arn], operation, **listing)]
        action = _BUCKET_GET.get(sub)
        extra = listing if sub in ("versions", "uploads") else {}
        return None if action is None else [check(action, [arn], action, **extra)]
    if method == "PUT":
        action = "CreateBucket" if sub is None else _BUCKET_PUT.get(sub)
        return None if action is None else [check(action, [arn], action)]
    if method == "DELETE":
        action = "DeleteBucket" if sub is None else _BUCKET_DELETE.get(sub)
        return None if action is None else [check(action, [arn], action)]
    if method == "POST" and sub == "delete":
        objects = _deleted_objects(body, arn)
        if objects is None:
            return None
        checks = [
            check(action, resources, "DeleteObjects")
            for action, versioned in (("DeleteObject", False), ("DeleteObjectVersion", True))
            if (resources := [resource for resource, has_version in objects if has_version is versioned])
        ]
        return checks
    return None


def _object_checks(
    method: str, headers: Mapping[str, str], params: dict[str, str], subresources: list[str], *, arn: str, check: _Check
) -> list[RequestContext] | None:
    versioned = "versionId" in params
    upload = "uploadId" in subresources
    others = [name for name in subresources if name != "uploadId"]
    if len(others) > 1:
        return None
    sub = others[0] if others else None
    if method in ("GET", "HEAD") and sub is None:
        if upload and method == "GET":
            return [check("ListMultipartUploadParts", [arn], "ListParts")]
        if upload:
            return None
        operation = "GetObject" if method == "GET" else "HeadObject"
        return [check("GetObjectVersion" if versioned else "GetObject", [arn], operation)]
    if sub in ("tagging", "acl") and method in ("GET", "PUT", "DELETE") and not upload:
        verb = {"GET": "Get", "PUT": "Put", "DELETE": "Delete"}[method]
        noun = "Tagging" if sub == "tagging" else "Acl"
        if method == "DELETE" and sub == "acl":
            return None
        action = f"{verb}Object{'Version' if versioned else ''}{noun}"
        return [check(action, [arn], f"{verb}Object{noun}")]
    if method == "PUT" and sub is None:
        written = {f"s3:{name}": headers[name] for name in _WRITE_HEADERS if name in headers}
        operation = "UploadPart" if upload else "PutObject"
        if "x-amz-copy-source" not in headers:
            return [check("PutObject", [arn], operation, **written)]
        source = _copy_source(headers)
        if source is None:
            return None
        source_arn, source_versioned = source
        operation = "UploadPartCopy" if upload else "CopyObject"
        return [
            check("GetObjectVersion" if source_versioned else "GetObject", [source_arn], operation),
            check("PutObject", [arn], operation, **written),
        ]
    if method == "POST" and sub == "uploads" and not upload:
        written = {f"s3:{name}": headers[name] for name in _WRITE_HEADERS if name in headers}
        return [check("PutObject", [arn], "CreateMultipartUpload", **written)]
    if method == "POST" and upload and sub is None:
        return [check("PutObject", [arn], "CompleteMultipartUpload")]
    if method == "DELETE" and sub is None:
        if upload:
            return [check("AbortMultipartUpload", [arn], "AbortMultipartUpload")]
        return [check("DeleteObjectVersion" if versioned else "DeleteObject", [arn], "DeleteObject")]
    return None
