"""Whether a failed ``GetObject``/``HeadObject`` means "no such key", without a bucket-wide ``s3:ListBucket`` grant.

S3 answers a read of a missing key with 404 only when the caller may ``s3:ListBucket`` the bucket; otherwise with 403
(``AccessDenied``, or a bare ``403`` for ``HeadObject``), exactly as it answers a real denial. A ``GetObject`` carries
no ``s3:prefix``, so a ``ListBucket`` grant conditioned on ``s3:prefix`` (the mesh's least-privilege grant,
``asya_deploy.access``) never turns that 403 into a 404. Granting ``ListBucket`` unconditioned would let every function
list every key of the bucket (task ids, checkpoint names) to learn about one key.

:func:`is_missing` tells the two 403s apart instead: a 404 is missing; a 403 is missing when a ``ListObjectsV2`` with
``Prefix`` = the key itself (which the prefix-conditioned grant allows) lists no object of exactly that key (S3 lists
are strongly consistent). The extra request is made on the 403 path only, so a present object costs one request as
before. A listing that fails, or finds the key, answers ``False``: the caller raises the original error.
"""

from __future__ import annotations

from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["DENIED_CODES", "MISSING_CODES", "is_missing"]

#: What S3 answers for a missing key when the caller may list the bucket (moto always answers these).
MISSING_CODES: Final = frozenset({"NoSuchKey", "404", "NotFound"})
#: What S3 answers for a missing key when the caller may not list the bucket, and for a denied read.
DENIED_CODES: Final = frozenset({"AccessDenied", "403", "Forbidden"})


def is_missing(s3: Any, bucket: str, key: str, error: ClientError) -> bool:
    """Whether ``error``, raised by a read of ``key``, means the object does not exist."""
    code = error.response.get("Error", {}).get("Code")
    if code in MISSING_CODES:
        return True
    if code not in DENIED_CODES:
        return False
    try:
        listing = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    except (ClientError, BotoCoreError):
        return False
    return not any(entry.get("Key") == key for entry in listing.get("Contents", []))
