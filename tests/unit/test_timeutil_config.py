"""Timestamps (P-GEN-3, GW-GEN-6), durations (P-GEN-4) and the actor configuration read from an env mapping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from asya.config import ActorConfig, ConfigError
from asya.timeutil import format_ts, format_ts_ms, parse_duration, parse_ts

pytestmark = pytest.mark.unit


def test_p_gen_3_envelope_timestamps_are_whole_seconds_with_z() -> None:
    moment = datetime(2026, 3, 1, 10, 0, 0, 987654, tzinfo=UTC)
    assert format_ts(moment) == "2026-03-01T10:00:00Z"
    assert format_ts_ms(moment) == "2026-03-01T10:00:00.987Z"


@pytest.mark.parametrize(
    "text", ["2026-03-01T10:00:00Z", "2026-03-01T10:00:00.5Z", "2026-03-01T12:00:00+02:00", "2026-03-01T10:00:00z"]
)
def test_p_gen_3_readers_accept_any_rfc3339_form(text: str) -> None:
    parsed = parse_ts(text)
    assert parsed is not None
    assert parsed.replace(microsecond=0) == datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text", ["", "yesterday", "2026-03-01T10:00:00", 5, None, "0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-02:00"]
)
def test_parse_ts_rejects_non_timestamps(text: object) -> None:
    assert parse_ts(text) is None


@pytest.mark.parametrize("bad", ["10 minutes", "-5s", True, [], float("nan"), -1])
def test_p_gen_4_bad_durations_name_field_and_value(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^actors\.a\.timeout: invalid duration"):
        parse_duration(bad, field="actors.a.timeout")


def test_actor_config_from_env_mapping() -> None:
    config = ActorConfig.from_env(
        {"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "analyze", "ASYA_HANDLER": "text.f", "ASYA_SINK_HOOKS": "a, b,"}
    )
    assert config.queue_name == "asya-demo-analyze"
    assert config.table == "asya-demo-tasks"
    assert config.actor_timeout == 60.0
    assert config.sink_hooks == ("a", "b")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ASYA_ACTOR": "a"}, "ASYA_NAMESPACE is required"),
        ({"ASYA_NAMESPACE": "demo"}, "ASYA_ACTOR is required"),
        ({"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "Bad"}, "invalid actor name 'Bad'"),
        ({"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "a", "ASYA_ACTOR_TIMEOUT": "soon"}, "must be a number, got 'soon'"),
        # non-finite numbers are refused like the gateway's (asya.config.positive_number serves both)
        ({"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "a", "ASYA_ACTOR_TIMEOUT": "nan"}, "must be > 0, got 'nan'"),
        ({"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "a", "ASYA_OFFLOAD_THRESHOLD_KB": "inf"}, "must be > 0, got 'inf'"),
    ],
)
def test_actor_config_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ActorConfig.from_env(env)


@pytest.mark.parametrize(
    ("moment", "stamp"),
    [
        (datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "2026-01-02T03:04:05.678Z"),
        (datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))), "2027-01-01T04:59:59.999Z"),
        (datetime(1000, 1, 1, 0, 0, 0, 999, tzinfo=UTC), "1000-01-01T00:00:00.000Z"),
        (datetime(999, 6, 1, 12, 0, 0, 1000, tzinfo=UTC), "0999-06-01T12:00:00.001Z"),
    ],
)
def test_gw_gen_6_format_ts_ms_reads_back(moment: datetime, stamp: str) -> None:
    # milliseconds truncated, UTC with Z, the year padded to four digits: parse_ts reads every stamp back
    assert format_ts_ms(moment) == stamp
    assert parse_ts(stamp) == moment.replace(microsecond=moment.microsecond // 1000 * 1000)
