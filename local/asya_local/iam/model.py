"""The value types shared by the request mapping and the proxy: one IAM check, and the context every request carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = ["ALWAYS_ALLOWED", "ContextDict", "RequestContext", "base_context"]

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
