"""API Gateway's answers under load, read from the templates for the artifact mesh's API front (docs/http.md GW-OVL-6).

- :class:`StageThrottle`: the stage's throttle (``AWS::ApiGateway::Stage`` ``MethodSettings`` for ``*`` on ``/*``:
  ``ThrottlingRateLimit`` requests per second, ``ThrottlingBurstLimit``), played as API Gateway's token bucket: the
  bucket holds ``burst`` tokens, refills at ``rate`` per second, and a request finding it empty is throttled.
- :class:`GatewayAnswer`: an ``AWS::ApiGateway::GatewayResponse`` (its type, status, static headers and JSON
  template), answered instead of API Gateway's default for that type: ``THROTTLED`` (default 429 ``{"message":
  "Too Many Requests"}``), ``INTEGRATION_FAILURE`` (a function that could not be reached; default 502
  ``{"message": "Internal server error"}``) and ``DEFAULT_5XX``, which stands in for any 5xx type without its own.

Only static values are emulated: a header value in single quotes and a template without ``$`` expressions. Anything
else is refused when the mesh starts, naming the resource.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from asya_local.artifact.template import Stack, TemplateError

__all__ = ["DEFAULT_ANSWERS", "EdgeLimits", "GatewayAnswer", "StageThrottle", "TokenBucket", "read_edge_limits"]

_HEADER_PREFIX: Final = "gatewayresponse.header."


@dataclass(frozen=True, slots=True)
class GatewayAnswer:
    """What API Gateway answers for one response type."""

    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=dict)


#: API Gateway's own answers when a template configures none.
DEFAULT_ANSWERS: Final = {
    "THROTTLED": GatewayAnswer(429, '{"message":"Too Many Requests"}'),
    "INTEGRATION_FAILURE": GatewayAnswer(502, '{"message": "Internal server error"}'),
}


@dataclass(frozen=True, slots=True)
class StageThrottle:
    rate: float
    burst: int


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """The stage throttle (``None``: unthrottled) and the gateway responses by type."""

    throttle: StageThrottle | None = None
    responses: Mapping[str, GatewayAnswer] = field(default_factory=dict)

    def answer(self, kind: str) -> GatewayAnswer:
        """The answer for response type ``kind``: its own, else ``DEFAULT_5XX`` for a 5xx default, else AWS's."""
        own = self.responses.get(kind)
        if own is not None:
            return own
        default = DEFAULT_ANSWERS[kind]
        if default.status >= 500 and "DEFAULT_5XX" in self.responses:
            return self.responses["DEFAULT_5XX"]
        return default


class TokenBucket:
    """API Gateway's throttle: ``burst`` tokens, refilled at ``rate`` per second; thread-safe."""

    def __init__(self, throttle: StageThrottle, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rate = throttle.rate
        self._burst = float(throttle.burst)
        self._tokens = float(throttle.burst)
        self._monotonic = monotonic
        self._at = monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """One request's token; False when the bucket is empty (the request is throttled)."""
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


def read_edge_limits(stacks: list[Stack]) -> EdgeLimits:
    """The stage throttle and gateway responses of the assembly's templates."""
    throttle: StageThrottle | None = None
    responses: dict[str, GatewayAnswer] = {}
    for stack in stacks:
        for resource in stack.resources.values():
            if resource.type == "AWS::ApiGateway::Stage":
                throttle = _stage_throttle(resource.prop("MethodSettings") or []) or throttle
            elif resource.type == "AWS::ApiGateway::GatewayResponse":
                kind = str(resource.prop("ResponseType"))
                responses[kind] = _answer(resource.logical_id, resource.prop)
    return EdgeLimits(throttle=throttle, responses=responses)


def _stage_throttle(settings: list[Mapping[str, Any]]) -> StageThrottle | None:
    for setting in settings:
        if setting.get("HttpMethod") == "*" and setting.get("ResourcePath") == "/*":
            rate, burst = setting.get("ThrottlingRateLimit"), setting.get("ThrottlingBurstLimit")
            if rate is not None and burst is not None:
                return StageThrottle(rate=float(rate), burst=int(burst))
    return None


def _answer(logical_id: str, prop: Callable[..., Any]) -> GatewayAnswer:
    headers: dict[str, str] = {}
    for name, value in (prop("ResponseParameters") or {}).items():
        text = str(value)
        if not name.startswith(_HEADER_PREFIX) or len(text) < 2 or not (text[0] == text[-1] == "'"):
            raise TemplateError(f"gateway response {logical_id}: only static headers are emulated, got {name}")
        headers[name[len(_HEADER_PREFIX) :]] = text[1:-1]
    body = str((prop("ResponseTemplates") or {}).get("application/json", ""))
    if "$" in body:
        raise TemplateError(f"gateway response {logical_id}: only static templates are emulated")
    status = prop("StatusCode")
    if status is None:
        raise TemplateError(f"gateway response {logical_id}: no StatusCode")
    return GatewayAnswer(status=int(status), body=body, headers=headers)
