"""Retry policies of one actor (P-RES-1..12): pure decisions, no I/O, time and randomness injected.

``ASYA_RESILIENCY`` holds the JSON of the actor's manifest ``resiliency`` section (``asya.manifest.Resiliency`` dumped
with durations in seconds). :meth:`RetryPolicies.parse` reads it once into frozen objects; a bad value is a
:class:`ResiliencyError` naming the field path and the value. Omitted policy fields take the defaults of P-RES-1.

Decisions:

- :meth:`RetryPolicies.select` picks the policy of an error details object (P-RES-3, P-RES-4);
- :meth:`RetryPolicy.delay` is the delay after failed attempt ``n`` (P-RES-5): ``constant``/``linear``/
  ``exponential`` from ``initial_delay``, then capped at ``max_interval`` (when > 0), then, with ``jitter``,
  multiplied by ``U = 0.5 + random()`` in ``[0.5, 1.5)``; SQS waits whole seconds, rounded up (P-RES-6);
- :meth:`RetryPolicies.plan` combines selection, delay and exhaustion (P-RES-7) into a :class:`RetryPlan`; a delay
  over 900 s is chained (P-RES-9): first send with ``DelaySeconds = 900`` and ``delay_until`` = when the delay ends;
- :func:`deferral` is step 3 of P-PROC-2: the ``DelaySeconds`` of a re-send while ``x-asya-delay-until`` is more than
  1 s away, else ``None``.

The deadline test of P-RES-7 uses the delay actually applied (whole seconds): a retry that cannot start at least 1 s
before ``deadline_at`` is not scheduled. Delays are capped at :data:`MAX_DELAY_SECONDS` so an uncapped exponential
backoff cannot overflow the timestamp of ``x-asya-delay-until``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, Literal

from asya import naming
from asya.exceptions import AsyaError
from asya.timeutil import parse_duration

__all__ = [
    "DEFAULT_POLICY",
    "MAX_DELAY_SECONDS",
    "SQS_MAX_DELAY_SECONDS",
    "Backoff",
    "ResiliencyError",
    "RetryPlan",
    "RetryPolicies",
    "RetryPolicy",
    "RetryRule",
    "deferral",
    "sqs_delay",
]

Backoff = Literal["constant", "linear", "exponential"]

#: The policy that applies when no rule matches (P-RES-4).
DEFAULT_POLICY: Final = "default"
#: SQS ``DelaySeconds`` maximum; longer delays are chained (P-RES-9).
SQS_MAX_DELAY_SECONDS: Final = 900
#: Upper bound of any computed delay (chosen): keeps ``now + delay`` a valid timestamp.
MAX_DELAY_SECONDS: Final = 366 * 24 * 3600
#: P-RES-7: a retry must be able to start this long before ``deadline_at``; P-RES-9: delays this short are done.
_MARGIN: Final = timedelta(seconds=1)
_BACKOFFS: Final = ("constant", "linear", "exponential")
_POLICY_FIELDS: Final = frozenset(
    {"max_attempts", "backoff", "initial_delay", "max_interval", "max_duration", "jitter", "on_exhausted"}
)


class ResiliencyError(AsyaError, ValueError):
    """The resiliency configuration is invalid; the message names the field path and the bad value."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """One policy (P-RES-1); durations in seconds."""

    name: str = DEFAULT_POLICY
    max_attempts: int = 3
    backoff: Backoff = "exponential"
    initial_delay: float = 1.0
    max_interval: float = 300.0
    max_duration: float = 0.0
    jitter: bool = True
    on_exhausted: tuple[str, ...] = ()

    def delay(self, attempt: int, random: Callable[[], float]) -> float:
        """Seconds to wait after failed attempt ``attempt`` (>= 1) before the next one (P-RES-5).

        ``random`` returns a float in ``[0, 1)``; it is called only when ``jitter`` is on.
        """
        n = max(attempt, 1)
        if self.backoff == "constant":
            delay = self.initial_delay
        elif self.backoff == "linear":
            delay = self.initial_delay * n
        else:
            # 2^64 s is far beyond MAX_DELAY_SECONDS: a larger exponent changes nothing but could overflow
            delay = self.initial_delay * 2.0 ** min(n - 1, 64)
        if self.max_interval > 0:
            delay = min(delay, self.max_interval)
        if self.jitter:
            delay *= 0.5 + random()
        return min(delay, float(MAX_DELAY_SECONDS))


@dataclass(frozen=True, slots=True)
class RetryRule:
    """Error patterns mapped to a policy (P-RES-2)."""

    errors: tuple[str, ...]
    policy: str

    def matches(self, candidates: Sequence[str]) -> bool:
        """P-RES-3: a dotted pattern equals a candidate; an undotted one equals a candidate's last dotted segment."""
        for pattern in self.errors:
            for candidate in candidates:
                if "." in pattern:
                    if candidate == pattern:
                        return True
                elif candidate.rpartition(".")[2] == pattern:
                    return True
        return False


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What to do after a failed attempt.

    ``policy is None``: no policy applies (reason ``RuntimeError``). ``exhausted``: no retry (``PolicyExhausted``, or
    ``PolicyRouted`` when the policy has ``on_exhausted``). Otherwise retry: ``delay`` is the P-RES-5 delay,
    ``delay_seconds`` the ``DelaySeconds`` of the send (<= 900) and ``delay_until`` the end of a chained delay.
    """

    policy: RetryPolicy | None
    exhausted: bool
    delay: float = 0.0
    delay_seconds: int = 0
    delay_until: datetime | None = None

    @property
    def max_attempts(self) -> int | None:
        return None if self.policy is None else self.policy.max_attempts


@dataclass(frozen=True, slots=True)
class RetryPolicies:
    """An actor's ``resiliency``: named policies and ordered rules. Empty: the actor never retries (P-RES-4)."""

    policies: Mapping[str, RetryPolicy] = field(default_factory=lambda: MappingProxyType({}))
    rules: tuple[RetryRule, ...] = ()

    @classmethod
    def parse(cls, text: str) -> RetryPolicies:
        """Read the JSON of ``ASYA_RESILIENCY``; ``""`` means no policies. Raises :class:`ResiliencyError`."""
        if not text.strip():
            return cls()
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ResiliencyError(f"not valid JSON: {exc}") from None
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: object) -> RetryPolicies:
        """Validate ``{policies: {name: policy}, rules: [{errors, policy}]}``. Raises :class:`ResiliencyError`."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ResiliencyError(f"must be an object with 'policies' and 'rules', got {raw!r}")
        _no_unknown(raw, {"policies", "rules"}, "resiliency")
        policies_raw = raw.get("policies") or {}
        if not isinstance(policies_raw, dict):
            raise ResiliencyError(f"policies must be an object mapping names to policies, got {policies_raw!r}")
        policies = {name: _policy(str(name), value) for name, value in policies_raw.items()}
        rules_raw = raw.get("rules") or []
        if not isinstance(rules_raw, list):
            raise ResiliencyError(f"rules must be an array, got {rules_raw!r}")
        rules = tuple(_rule(index, value, policies) for index, value in enumerate(rules_raw))
        return cls(policies=MappingProxyType(policies), rules=rules)

    def select(self, details: Mapping[str, Any]) -> RetryPolicy | None:
        """The policy for a handler error's details object (P-RES-3), else ``default`` when declared (P-RES-4)."""
        candidates = _candidates(details)
        for rule in self.rules:
            if rule.matches(candidates):
                return self.policies[rule.policy]
        return self.policies.get(DEFAULT_POLICY)

    def plan(
        self,
        details: Mapping[str, Any],
        *,
        attempt: int,
        now: datetime,
        first_attempt: datetime | None,
        deadline: datetime | None,
        random: Callable[[], float],
    ) -> RetryPlan:
        """The outcome after failed attempt ``attempt`` (P-RES-4, P-RES-7, P-RES-9).

        ``first_attempt`` is ``x-asya-first-attempt`` (``None`` when missing or unparseable), ``deadline`` the
        envelope's ``deadline_at``.
        """
        policy = self.select(details)
        if policy is None:
            return RetryPlan(policy=None, exhausted=True)
        if attempt >= policy.max_attempts:
            return RetryPlan(policy=policy, exhausted=True)
        elapsed = None if first_attempt is None else (now - first_attempt).total_seconds()
        if policy.max_duration > 0 and elapsed is not None and elapsed >= policy.max_duration:
            return RetryPlan(policy=policy, exhausted=True)
        delay = policy.delay(attempt, random)
        total = sqs_delay(delay)
        if deadline is not None and now + timedelta(seconds=total) >= deadline - _MARGIN:
            return RetryPlan(policy=policy, exhausted=True, delay=delay)
        if total <= SQS_MAX_DELAY_SECONDS:
            return RetryPlan(policy=policy, exhausted=False, delay=delay, delay_seconds=total)
        until = now + timedelta(seconds=total)
        return RetryPlan(
            policy=policy, exhausted=False, delay=delay, delay_seconds=SQS_MAX_DELAY_SECONDS, delay_until=until
        )


def sqs_delay(delay: float) -> int:
    """Whole seconds, rounded up (P-RES-6); float noise below a microsecond does not add a second."""
    return max(0, math.ceil(round(delay, 6)))


def deferral(delay_until: datetime | None, now: datetime) -> int | None:
    """Step 3 of P-PROC-2 (P-RES-9): ``DelaySeconds`` of the re-send when ``delay_until`` is more than 1 s away,
    else ``None`` (the delay is over, or the header is missing or unparseable: process the envelope)."""
    if delay_until is None:
        return None
    remaining = delay_until - now
    if remaining <= _MARGIN:
        return None
    return min(SQS_MAX_DELAY_SECONDS, math.ceil(remaining.total_seconds()))


def _candidates(details: Mapping[str, Any]) -> list[str]:
    """``[details.type] + details.mro`` (P-RES-3); members of the wrong type are skipped."""
    out: list[str] = []
    kind = details.get("type")
    if isinstance(kind, str) and kind:
        out.append(kind)
    mro = details.get("mro")
    if isinstance(mro, list):
        out.extend(name for name in mro if isinstance(name, str) and name)
    return out


def _no_unknown(raw: Mapping[str, Any], allowed: frozenset[str] | set[str], path: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        raise ResiliencyError(f"{path}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _policy(name: str, raw: object) -> RetryPolicy:
    path = f"policies.{name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ResiliencyError(f"{path} must be an object, got {raw!r}")
    _no_unknown(raw, _POLICY_FIELDS, path)
    defaults = RetryPolicy()
    max_attempts = raw.get("max_attempts", defaults.max_attempts)
    if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
        raise ResiliencyError(f"{path}.max_attempts must be an integer >= 1, got {max_attempts!r}")
    backoff = raw.get("backoff", defaults.backoff)
    if backoff not in _BACKOFFS:
        raise ResiliencyError(f"{path}.backoff must be one of {list(_BACKOFFS)}, got {backoff!r}")
    jitter = raw.get("jitter", defaults.jitter)
    if not isinstance(jitter, bool):
        raise ResiliencyError(f"{path}.jitter must be true or false, got {jitter!r}")
    on_exhausted = raw.get("on_exhausted", [])
    if not isinstance(on_exhausted, list) or not all(
        isinstance(a, str) and naming.is_valid_actor_name(a) for a in on_exhausted
    ):
        raise ResiliencyError(f"{path}.on_exhausted must be an array of actor names, got {on_exhausted!r}")
    return RetryPolicy(
        name=name,
        max_attempts=max_attempts,
        backoff=backoff,
        initial_delay=_seconds(raw, "initial_delay", defaults.initial_delay, path),
        max_interval=_seconds(raw, "max_interval", defaults.max_interval, path),
        max_duration=_seconds(raw, "max_duration", defaults.max_duration, path),
        jitter=jitter,
        on_exhausted=tuple(on_exhausted),
    )


def _seconds(raw: Mapping[str, Any], key: str, default: float, path: str) -> float:
    if key not in raw:
        return default
    try:
        return parse_duration(raw[key], field=f"{path}.{key}")
    except ValueError as exc:
        raise ResiliencyError(str(exc)) from None


def _rule(index: int, raw: object, policies: Mapping[str, RetryPolicy]) -> RetryRule:
    path = f"rules[{index}]"
    if not isinstance(raw, dict):
        raise ResiliencyError(f"{path} must be an object with 'errors' and 'policy', got {raw!r}")
    _no_unknown(raw, {"errors", "policy"}, path)
    errors = raw.get("errors")
    if not isinstance(errors, list) or not errors or not all(isinstance(e, str) and e for e in errors):
        raise ResiliencyError(f"{path}.errors must be a non-empty array of non-empty strings, got {errors!r}")
    policy = raw.get("policy")
    if not isinstance(policy, str) or policy not in policies:
        raise ResiliencyError(
            f"{path}.policy names undeclared policy {policy!r}; declared: {sorted(policies) or 'none'}"
        )
    return RetryRule(errors=tuple(errors), policy=policy)
