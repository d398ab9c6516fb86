"""The value types shared by the request mapping and the proxy: one IAM check, one record of a decided check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from asya_local.iam.policy import Decision

__all__ = [
    "ALWAYS_ALLOWED",
    "MISSING_KEY",
    "UNMODELLED",
    "AccessRecord",
    "ContextDict",
    "RequestContext",
    "base_context",
]

ContextDict = dict[str, str | tuple[str, ...]]
#: Actions AWS authorizes for every principal, whatever its policies.
ALWAYS_ALLOWED: Final = frozenset({"sts:GetCallerIdentity"})


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One IAM check: ``action`` (``service:Action``) must be allowed on every one of ``resources``."""

    service: str
    action: str
    resources: tuple[str, ...]
    context: ContextDict = field(default_factory=dict)
    #: The API operation the request was (``HeadObject``, ``ListObjectsV2``): several share one IAM action.
    operation: str = ""


def base_context(region: str, account_id: str) -> ContextDict:
    """The global keys every request carries here (``aws:SecureTransport``: see :mod:`asya_local.iam.requests`)."""
    return {"aws:RequestedRegion": region, "aws:PrincipalAccount": account_id, "aws:SecureTransport": "true"}


UNMODELLED: Final = "unmodelled"
MISSING_KEY: Final = "missing key: 404 needs s3:ListBucket"


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One checked (action, resource) of one principal's call, and how it was decided.

    ``statement`` is the deciding statement's Sid or ``#<document>.<index>``, ``None`` for an implicit deny,
    ``"unmodelled"`` for a request the proxy does not model, ``"always-allowed"`` for ``sts:GetCallerIdentity``.
    ``operation`` is the API operation; ``note`` says when a check came from S3's missing-key rule."""

    principal: str
    service: str
    action: str
    resource: str
    decision: Decision
    statement: str | None
    operation: str = ""
    note: str = ""
