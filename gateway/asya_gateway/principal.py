"""Authorization by claims under ``gateway.auth.mode: jwt`` (GW-EDGE-4, GW-EDGE-5).

:class:`asya_gateway.auth.AuthMiddleware` records the verified token's claims for the request (:func:`bind_claims`,
a context variable: the request's task and the worker threads it starts see them). Then:

- :func:`require_flow_scopes`: creating a task of a flow listed in ``gateway.auth.flow_scopes`` needs every scope
  listed there (``scope`` or ``scp`` claims); a missing one answers 403 ``{"error": "missing scope '<scope>' for
  flow '<flow>'"}``. Called by :func:`asya_gateway.creation.start_task`, so REST, MCP and A2A creates alike.
- Under ``gateway.auth.owner_only``, :func:`owner_of_new_task` is the creator's ``sub``, stored on the task item by
  the create's own write; :func:`check_owner` answers 404 (as for an unknown id, so ids are not probed) when a task
  view's ``owner`` is not the caller's; :func:`listing_owner` restricts the listing to the caller's tasks.
- :func:`is_visible` is the one owner check of every path that reads or acts on a task by id (GW-EDGE-7): REST
  view, cancel, SSE (one task or many), history, retry, resume; A2A ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe`` and ``message/send`` continuing a task; MCP ``notifications/cancelled`` and the re-sent
  ``tools/call``. Another's task is answered as an unknown id on each. :func:`owner_checks` says whether a path that
  acts without reading the task (a cancel) must read it first.

Outside ``jwt`` (and for requests without claims, such as the reporters') nothing is checked here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Final

from asya.manifest import GatewayAuth
from asya_gateway.errors import HttpError
from asya_gateway.jwtauth import token_scopes

__all__ = [
    "bind_claims",
    "caller_principal",
    "check_owner",
    "current_claims",
    "is_visible",
    "listing_owner",
    "owner_checks",
    "owner_of_new_task",
    "require_flow_scopes",
]

_CLAIMS: Final[ContextVar[Mapping[str, Any] | None]] = ContextVar("asya_gateway_claims", default=None)
_NOT_FOUND: Final = "not found"  # the answer for an unknown id (routes.tasks.NOT_FOUND)


def bind_claims(claims: Mapping[str, Any] | None) -> None:
    """Record the request's verified claims (the middleware, once per request)."""
    _CLAIMS.set(claims)


def current_claims() -> Mapping[str, Any] | None:
    return _CLAIMS.get()


def require_flow_scopes(auth: GatewayAuth, flow: str | None) -> None:
    """GW-EDGE-4: 403 naming the first missing scope of ``flow``'s required ones."""
    required = auth.flow_scopes.get(flow or "") if auth.mode == "jwt" else None
    if not required:
        return
    claims = current_claims() or {}
    granted = token_scopes(claims)
    for scope in required:
        if scope not in granted:
            raise HttpError(403, f"missing scope {scope!r} for flow {flow!r}")


def caller_principal(auth: GatewayAuth, credential: str | None) -> str:
    """Who the caller is, for what it opens and must alone use again (an MCP session, GW-EDGE-9): under ``jwt`` its
    ``sub`` (a token refreshed for the same subject keeps its sessions), under ``api_key`` a SHA-256 of its key (never
    the key itself), else ``""`` (no identity to tell apart: ``iam`` is checked by API Gateway, ``none`` not at all)."""
    if auth.mode == "jwt":
        return "sub:" + (_subject() or "")
    if auth.mode == "api_key" and credential:
        return "key:" + hashlib.sha256(credential.encode("utf-8", "surrogatepass")).hexdigest()
    return ""


def _subject() -> str | None:
    claims = current_claims()
    subject = claims.get("sub") if claims is not None else None
    return subject if isinstance(subject, str) and subject else None


def owner_checks(auth: GatewayAuth) -> bool:
    """Whether tasks have owners to check (``jwt`` with ``owner_only``)."""
    return auth.mode == "jwt" and auth.owner_only


def owner_of_new_task(auth: GatewayAuth) -> str | None:
    """The ``owner`` to store on a new task: the caller's ``sub`` under ``owner_only``, else ``None``."""
    return _subject() if owner_checks(auth) else None


def listing_owner(auth: GatewayAuth) -> str | None:
    """The owner the listing is restricted to under ``owner_only`` (a caller without ``sub`` sees nothing)."""
    if not owner_checks(auth):
        return None
    return _subject() or "\x00"  # no subject: match no task


def is_visible(auth: GatewayAuth, view: Mapping[str, Any]) -> bool:
    """GW-EDGE-5, GW-EDGE-7: whether the caller may see the task of ``view`` (any mapping with its ``owner``)."""
    if not owner_checks(auth):
        return True
    subject = _subject()
    return subject is not None and view.get("owner") == subject


def check_owner(auth: GatewayAuth, view: Mapping[str, Any]) -> None:
    """GW-EDGE-5: 404 when ``owner_only`` and the task is not the caller's."""
    if not is_visible(auth, view):
        raise HttpError(404, _NOT_FOUND)
