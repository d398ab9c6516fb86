"""Retry policies (PROTOCOL 8.2-8.4): parsing ``ASYA_RESILIENCY``, rule matching, delays, exhaustion, chained delays.

Pure: time is a fixed ``datetime`` and randomness an injected callable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya.config import ActorConfig, ConfigError
from asya.manifest import parse_manifest
from asya.resiliency import (
    MAX_DELAY_SECONDS,
    ResiliencyError,
    RetryPolicies,
    RetryPolicy,
    deferral,
    sqs_delay,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
#: P-ERR-3 example: ``class Boom(ValueError)`` in ``mylib.errors``.
BOOM: dict[str, Any] = {"message": "boom", "type": "mylib.errors.Boom", "mro": ["ValueError", "Exception"]}
KEY_ERROR: dict[str, Any] = {"message": "'k'", "type": "KeyError", "mro": ["LookupError", "Exception"]}


def no_random() -> float:
    raise AssertionError("random() must not be called without jitter")


def policies(raw: dict[str, Any]) -> RetryPolicies:
    return RetryPolicies.parse(json.dumps(raw))


def plan_for(
    pols: RetryPolicies,
    details: dict[str, Any] = BOOM,
    *,
    attempt: int = 1,
    first_attempt: datetime | None = NOW,
    deadline: datetime | None = None,
    random: Callable[[], float] = no_random,
) -> Any:
    return pols.plan(details, attempt=attempt, now=NOW, first_attempt=first_attempt, deadline=deadline, random=random)


# -- parsing ----------------------------------------------------------------------------------------------------------


def test_p_res_4_empty_configuration_never_retries() -> None:
    for text in ("", "   ", "null", '{"policies": {}, "rules": []}'):
        pols = RetryPolicies.parse(text)
        assert pols.select(BOOM) is None
        plan = plan_for(pols)
        assert plan.policy is None
        assert plan.exhausted


def test_p_res_1_omitted_fields_take_the_defaults() -> None:
    policy = policies({"policies": {"default": {}}}).policies["default"]
    assert policy == RetryPolicy(
        name="default",
        max_attempts=3,
        backoff="exponential",
        initial_delay=1.0,
        max_interval=300.0,
        max_duration=0.0,
        jitter=True,
        on_exhausted=(),
    )


def test_p_res_1_durations_accept_unit_strings() -> None:
    policy = policies({"policies": {"slow": {"initial_delay": "500ms", "max_interval": "2m", "max_duration": "1h"}}})
    assert policy.policies["slow"].initial_delay == 0.5
    assert policy.policies["slow"].max_interval == 120.0
    assert policy.policies["slow"].max_duration == 3600.0


def test_manifest_dump_is_what_the_runtime_reads() -> None:
    """CDK and the local mode render ``resiliency.model_dump(mode="json")`` into ASYA_RESILIENCY (P-MAN-1)."""
    manifest = parse_manifest(
        {
            "namespace": "demo",
            "actors": {
                "pay": {
                    "handler": "shop.pay",
                    "resiliency": {
                        "policies": {
                            "default": {"max_attempts": 4, "backoff": "linear", "initial_delay": "2s"},
                            "fast": {"max_attempts": 2, "jitter": False, "on_exhausted": ["refund"]},
                        },
                        "rules": [{"errors": ["TimeoutError", "shop.errors.Busy"], "policy": "fast"}],
                    },
                },
                "refund": {"handler": "shop.refund"},
            },
            "flows": {"buy": {"route": ["pay"]}},
        }
    )
    resiliency = manifest.actors["pay"].resiliency
    assert resiliency is not None
    config = ActorConfig.from_env(
        {
            "ASYA_NAMESPACE": "demo",
            "ASYA_ACTOR": "pay",
            "ASYA_RESILIENCY": json.dumps(resiliency.model_dump(mode="json")),
        }
    )
    pols = config.resiliency
    assert pols.policies["default"] == RetryPolicy(name="default", max_attempts=4, backoff="linear", initial_delay=2.0)
    assert pols.policies["fast"].on_exhausted == ("refund",)
    assert pols.policies["fast"].jitter is False
    assert [(r.errors, r.policy) for r in pols.rules] == [(("TimeoutError", "shop.errors.Busy"), "fast")]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "must be an object"),
        ('{"policies": {"a": {"max_attempts": 0}}}', "policies.a.max_attempts must be an integer >= 1, got 0"),
        ('{"policies": {"a": {"max_attempts": true}}}', "policies.a.max_attempts"),
        ('{"policies": {"a": {"backoff": "fibonacci"}}}', "policies.a.backoff must be one of"),
        ('{"policies": {"a": {"initial_delay": -1}}}', "policies.a.initial_delay"),
        ('{"policies": {"a": {"max_interval": "soon"}}}', "policies.a.max_interval"),
        ('{"policies": {"a": {"jitter": "yes"}}}', "policies.a.jitter must be true or false, got 'yes'"),
        ('{"policies": {"a": {"on_exhausted": ["Bad Name"]}}}', "policies.a.on_exhausted"),
        ('{"policies": {"a": {"retries": 3}}}', "policies.a: unknown field(s) ['retries']"),
        ('{"policies": {}, "rules": [{"errors": ["E"], "policy": "ghost"}]}', "rules[0].policy names undeclared"),
        ('{"policies": {"a": {}}, "rules": [{"errors": [], "policy": "a"}]}', "rules[0].errors must be a non-empty"),
        ('{"policies": {"a": {}}, "extra": 1}', "resiliency: unknown field(s) ['extra']"),
    ],
)
def test_p_man_1_invalid_resiliency_names_the_field_and_value(raw: str, fragment: str) -> None:
    """Among them P-RES-2: rules are a list of ``{errors, policy}`` and a rule naming an undeclared policy is an
    error."""
    with pytest.raises(ResiliencyError) as info:
        RetryPolicies.parse(raw)
    assert fragment in str(info.value)


def test_invalid_resiliency_env_is_a_config_error_naming_the_variable() -> None:
    env = {
        "ASYA_NAMESPACE": "demo",
        "ASYA_ACTOR": "pay",
        "ASYA_RESILIENCY": '{"policies": {"a": {"max_attempts": -2}}}',
    }
    with pytest.raises(ConfigError) as info:
        ActorConfig.from_env(env)
    assert "ASYA_RESILIENCY" in str(info.value)
    assert "policies.a.max_attempts" in str(info.value)
    assert "-2" in str(info.value)


def test_parsed_policies_are_frozen() -> None:
    pols = policies({"policies": {"default": {}}})
    with pytest.raises(TypeError):
        pols.policies["other"] = RetryPolicy()  # type: ignore[index]
    with pytest.raises(AttributeError):
        pols.policies["default"].max_attempts = 9  # type: ignore[misc]


# -- matching (P-RES-3, P-RES-4) --------------------------------------------------------------------------------------


def _matching(pattern: str, details: dict[str, Any] = BOOM) -> bool:
    pols = policies({"policies": {"hit": {}}, "rules": [{"errors": [pattern], "policy": "hit"}]})
    return pols.select(details) is not None


@pytest.mark.parametrize(
    ("pattern", "matches"),
    [
        ("mylib.errors.Boom", True),  # dotted: equal to the type
        ("Boom", True),  # undotted: the type's last segment
        ("ValueError", True),  # an ancestor from details.mro
        ("Exception", True),
        ("errors.Boom", False),  # dotted patterns are exact, never suffixes
        ("builtins.ValueError", False),  # builtins carry no module (P-ERR-3)
        ("boom", False),  # case-sensitive
        ("Boo", False),
        ("LookupError", False),
    ],
)
def test_p_res_3_pattern_matching_full_dotted_vs_short_name(pattern: str, matches: bool) -> None:
    assert _matching(pattern) is matches


def test_p_res_3_undotted_pattern_matches_an_undotted_candidate_whole() -> None:
    assert _matching("KeyError", KEY_ERROR)
    assert _matching("LookupError", KEY_ERROR)
    assert not _matching("Key", KEY_ERROR)


def test_p_res_3_first_matching_rule_wins() -> None:
    pols = policies(
        {
            "policies": {"narrow": {}, "broad": {}, "default": {}},
            "rules": [
                {"errors": ["KeyError", "Boom"], "policy": "narrow"},
                {"errors": ["ValueError"], "policy": "broad"},
                {"errors": ["Exception"], "policy": "default"},
            ],
        }
    )
    selected = pols.select(BOOM)
    assert selected is not None
    assert selected.name == "narrow"
    other = pols.select({"message": "x", "type": "ValueError", "mro": ["Exception"]})
    assert other is not None
    assert other.name == "broad"


def test_p_res_4_default_policy_applies_when_no_rule_matches() -> None:
    pols = policies({"policies": {"default": {}, "keys": {}}, "rules": [{"errors": ["KeyError"], "policy": "keys"}]})
    chosen = pols.select(BOOM)
    assert chosen is not None
    assert chosen.name == "default"


def test_p_res_4_no_rule_and_no_default_means_no_policy() -> None:
    pols = policies({"policies": {"keys": {}}, "rules": [{"errors": ["KeyError"], "policy": "keys"}]})
    assert pols.select(BOOM) is None
    plan = plan_for(pols)
    assert plan.policy is None
    assert plan.exhausted


# -- delays (P-RES-5, P-RES-6) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        ("constant", [3.0, 3.0, 3.0, 3.0]),
        ("linear", [3.0, 6.0, 9.0, 12.0]),
        ("exponential", [3.0, 6.0, 12.0, 24.0]),
    ],
)
def test_p_res_5_backoff_shapes(backoff: str, expected: list[float]) -> None:
    policy = RetryPolicy(backoff=backoff, initial_delay=3.0, max_interval=0.0, jitter=False)  # type: ignore[arg-type]
    assert [policy.delay(n, no_random) for n in (1, 2, 3, 4)] == expected


def test_p_res_5_cap_applies_before_jitter() -> None:
    policy = RetryPolicy(backoff="exponential", initial_delay=10.0, max_interval=30.0, jitter=True)
    assert policy.delay(4, lambda: 0.0) == 15.0  # 80 -> capped 30 -> x0.5
    assert policy.delay(4, lambda: 0.5) == 30.0
    assert policy.delay(4, lambda: 0.999) == pytest.approx(44.97)  # may exceed the cap by up to half
    assert policy.delay(1, lambda: 0.0) == 5.0  # below the cap: 10 x 0.5


def test_p_res_5_zero_initial_delay_gives_zero() -> None:
    for backoff in ("constant", "linear", "exponential"):
        policy = RetryPolicy(backoff=backoff, initial_delay=0.0)  # type: ignore[arg-type]
        assert policy.delay(5, lambda: 0.7) == 0.0


def test_p_res_5_uncapped_exponential_never_overflows() -> None:
    policy = RetryPolicy(backoff="exponential", initial_delay=1.0, max_interval=0.0, jitter=False)
    assert policy.delay(5000, no_random) == MAX_DELAY_SECONDS


@pytest.mark.parametrize(("delay", "seconds"), [(0.0, 0), (0.2, 1), (1.0, 1), (2.4000000000000004, 3), (1.1 * 10, 11)])
def test_p_res_6_sqs_delay_rounds_up_to_whole_seconds(delay: float, seconds: int) -> None:
    assert sqs_delay(delay) == seconds


# -- attempts and exhaustion (P-RES-7) --------------------------------------------------------------------------------


def test_p_res_7_attempts_are_counted_against_max_attempts() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 3, "initial_delay": 2, "jitter": False}}})
    first = plan_for(pols, attempt=1)
    assert not first.exhausted
    assert (first.delay, first.delay_seconds, first.delay_until) == (2.0, 2, None)
    second = plan_for(pols, attempt=2)
    assert not second.exhausted
    assert second.delay_seconds == 4
    third = plan_for(pols, attempt=3)
    assert third.exhausted
    assert third.policy is not None
    assert third.max_attempts == 3


def test_p_res_7_max_attempts_one_never_retries() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 1}}})
    assert plan_for(pols, attempt=1, random=lambda: 0.5).exhausted


def test_p_res_7_max_duration_counts_from_the_first_attempt() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 10, "max_duration": "10s", "jitter": False}}})
    assert plan_for(pols, attempt=2, first_attempt=NOW - timedelta(seconds=10)).exhausted
    assert not plan_for(pols, attempt=2, first_attempt=NOW - timedelta(seconds=9)).exhausted
    assert not plan_for(pols, attempt=2, first_attempt=None).exhausted, "missing header: no duration limit"


def test_p_res_7_zero_max_duration_is_no_limit() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 10, "jitter": False}}})
    assert not plan_for(pols, attempt=2, first_attempt=NOW - timedelta(days=3)).exhausted


def test_p_res_7_retry_that_cannot_start_before_the_deadline_is_not_scheduled() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 5, "initial_delay": 10, "jitter": False}}})
    # delay 10 s: the retry starts at NOW + 10 s and needs 1 s before the deadline
    assert plan_for(pols, deadline=NOW + timedelta(seconds=11)).exhausted
    assert not plan_for(pols, deadline=NOW + timedelta(seconds=12)).exhausted
    assert not plan_for(pols, deadline=None).exhausted


def test_p_res_7_deadline_test_uses_the_jittered_delay() -> None:
    pols = policies({"policies": {"default": {"max_attempts": 5, "initial_delay": 10}}})
    deadline = NOW + timedelta(seconds=12)
    assert not plan_for(pols, deadline=deadline, random=lambda: 0.5).exhausted  # 10 s
    assert plan_for(pols, deadline=deadline, random=lambda: 0.6).exhausted  # 11 s


# -- chained delays (P-RES-9) -----------------------------------------------------------------------------------------


def test_p_res_9_delays_over_900_seconds_are_chained() -> None:
    pols = policies({"policies": {"default": {"initial_delay": "2000s", "max_interval": 0, "jitter": False}}})
    plan = plan_for(pols)
    assert not plan.exhausted
    assert plan.delay_seconds == 900
    assert plan.delay_until == NOW + timedelta(seconds=2000)


def test_p_res_9_a_900_second_delay_is_not_chained() -> None:
    pols = policies({"policies": {"default": {"initial_delay": "900s", "max_interval": 0, "jitter": False}}})
    plan = plan_for(pols)
    assert (plan.delay_seconds, plan.delay_until) == (900, None)


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [(1100.0, 900), (900.0, 900), (500.0, 500), (1.5, 2), (1.0, None), (0.2, None), (-30.0, None)],
)
def test_p_res_9_deferral_resends_while_more_than_one_second_remains(remaining: float, expected: int | None) -> None:
    assert deferral(NOW + timedelta(seconds=remaining), NOW) == expected


def test_p_res_9_missing_or_unparseable_delay_until_is_no_deferral() -> None:
    assert deferral(None, NOW) is None
