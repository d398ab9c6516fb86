"""API Gateway's Lambda authorizers for the artifact mesh's API front (GW-EDGE-1; docs/deploy.md "Local
emulation"): a ``CUSTOM`` method runs its authorizer function before the method, as API Gateway does.

- ``TOKEN``: the identity source header (``method.request.header.X``) missing or empty, or not matching the
  authorizer's ``IdentityValidationExpression``: 401 ``{"message": "Unauthorized"}``, nothing invoked. Else the
  function gets ``{"type": "TOKEN", "authorizationToken", "methodArn"}``.
- ``REQUEST``: with caching on (a TTL above 0), any identity source missing: 401 without an invocation. The function
  gets ``{"type": "REQUEST", "methodArn", "resource", "path", "httpMethod", "headers", "queryStringParameters",
  "requestContext"}``.
- The function raising ``Unauthorized``: 401 ``{"message": "Unauthorized"}``; raising anything else, or answering
  without a policy: 500 ``{"message": null}`` (API Gateway's ``AuthorizerConfigurationException``). A policy whose
  statements do not allow ``execute-api:Invoke`` on the method's ARN (``*``/``?`` wildcards; an explicit Deny wins):
  403 ``{"Message": "User is not authorized to access this resource"}``.
- The answer (a policy) is cached per authorizer and identity-source values for ``AuthorizerResultTtlInSeconds``
  (default 300) and evaluated again for each method, as API Gateway reuses a cached policy; refusals are not cached.

``COGNITO_USER_POOLS`` authorizers are not emulated: :func:`check_supported` refuses them at start with the reason.
:attr:`EdgeAuthorizers.invocations` counts the function calls per authorizer (tests assert the cache with it).
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from asya_local.artifact.model import ApiMethod
from asya_local.artifact.process import FunctionError
from asya_local.exceptions import LocalModeError

__all__ = ["AuthorizerVerdict", "EdgeAuthorizers", "check_supported"]

_HEADER: Final = "method.request.header."
_UNAUTHORIZED: Final = (401, {"message": "Unauthorized"})
_FORBIDDEN: Final = (403, {"Message": "User is not authorized to access this resource"})
_MISCONFIGURED: Final = (500, {"message": None})
#: (function ARN, event) -> the function's answer; raises FunctionError as a Lambda invocation fails
Invoke = Callable[[str, dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class AuthorizerVerdict:
    """``status`` is ``None`` when the method may run; ``context`` is what the authorizer passed on."""

    status: int | None
    body: Mapping[str, Any]
    context: Mapping[str, Any]


def check_supported(method: ApiMethod) -> None:
    """Refuse, at start, a ``CUSTOM``/``COGNITO_USER_POOLS`` method the front cannot run, saying why."""
    where = f"API method {method.http_method} {method.path}"
    if method.authorization == "COGNITO_USER_POOLS":
        raise LocalModeError(
            f"{where}: Cognito user-pool authorizers are not emulated by the artifact mesh (no user pool exists "
            "locally); use gateway.auth.mode 'jwt', whose Lambda authorizer runs here"
        )
    authorizer = method.authorizer or {}
    if authorizer.get("Type") not in ("TOKEN", "REQUEST") or _function_arn(authorizer) is None:
        raise LocalModeError(f"{where}: authorizer {authorizer.get('Type')!r} is not a Lambda TOKEN/REQUEST authorizer")


def _function_arn(authorizer: Mapping[str, Any]) -> str | None:
    uri = str(authorizer.get("AuthorizerUri", ""))
    if "/functions/" not in uri:
        return None
    return uri.split("/functions/", 1)[1].removesuffix("/invocations")


def _identity(authorizer: Mapping[str, Any], headers: Mapping[str, str]) -> list[str | None]:
    sources = [s.strip() for s in str(authorizer.get("IdentitySource", "")).split(",") if s.strip()]
    return [headers.get(s[len(_HEADER) :].lower()) if s.startswith(_HEADER) else None for s in sources]


def _allows(policy: Any, arn: str) -> bool:
    statements = policy.get("Statement", []) if isinstance(policy, dict) else []
    if isinstance(statements, dict):
        statements = [statements]
    allowed = False
    for statement in statements:
        actions = statement.get("Action", [])
        resources = statement.get("Resource", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        acts = any(fnmatch.fnmatchcase("execute-api:Invoke", a) for a in actions)
        if not acts or not any(fnmatch.fnmatchcase(arn, r) for r in resources):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


class EdgeAuthorizers:
    """The authorizers of one API front (module docstring)."""

    def __init__(
        self, invoke: Invoke, *, api_arn: str, stage: str, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._invoke = invoke
        self._api_arn = api_arn
        self._stage = stage
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, tuple[str | None, ...]], tuple[float, dict[str, Any]]] = {}
        self.invocations: dict[str, int] = {}

    def check(
        self, method: ApiMethod, *, http_method: str, path: str, query: str, headers: Mapping[str, str]
    ) -> AuthorizerVerdict:
        authorizer = method.authorizer or {}
        function = _function_arn(authorizer)
        assert function is not None  # check_supported ran at start
        method_arn = f"{self._api_arn}/{self._stage}/{http_method.upper()}/{path.lstrip('/')}"
        identity = _identity(authorizer, headers)
        ttl = int(authorizer.get("AuthorizerResultTtlInSeconds", 300))
        kind = authorizer.get("Type")
        if kind == "TOKEN":
            token = identity[0] if identity else None
            expression = authorizer.get("IdentityValidationExpression")
            if not token or (expression and re.fullmatch(str(expression), token) is None):
                return _verdict(_UNAUTHORIZED)
            event: dict[str, Any] = {"type": "TOKEN", "authorizationToken": token, "methodArn": method_arn}
        else:
            if ttl > 0 and not all(identity):
                return _verdict(_UNAUTHORIZED)
            event = {
                "type": "REQUEST",
                "methodArn": method_arn,
                "resource": method.path,
                "path": path,
                "httpMethod": http_method.upper(),
                "headers": dict(headers),
                "queryStringParameters": dict(p.partition("=")[::2] for p in query.split("&") if p) or None,
                "requestContext": {"stage": self._stage, "resourcePath": method.path, "httpMethod": http_method},
            }
        key = (json.dumps(authorizer, sort_keys=True, default=str), tuple(identity))
        answer = self._cached(key) if ttl > 0 else None
        if answer is None:
            with self._lock:
                self.invocations[function] = self.invocations.get(function, 0) + 1
            try:
                answer = self._invoke(function, event)
            except FunctionError as exc:
                return _verdict(_UNAUTHORIZED if exc.error_message == "Unauthorized" else _MISCONFIGURED)
            if not isinstance(answer, dict) or "policyDocument" not in answer:
                return _verdict(_MISCONFIGURED)
            if ttl > 0:
                with self._lock:
                    self._cache[key] = (self._monotonic() + ttl, answer)
        if not _allows(answer["policyDocument"], method_arn):
            return _verdict(_FORBIDDEN)
        context = {**(answer.get("context") or {}), "principalId": answer.get("principalId")}
        return AuthorizerVerdict(None, {}, context)

    def _cached(self, key: tuple[str, tuple[str | None, ...]]) -> dict[str, Any] | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None or entry[0] <= self._monotonic():
                return None
            return entry[1]


def _verdict(answer: tuple[int, Mapping[str, Any]]) -> AuthorizerVerdict:
    return AuthorizerVerdict(answer[0], answer[1], {})
