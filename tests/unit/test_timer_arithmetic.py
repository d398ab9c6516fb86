"""Deadline timer arithmetic and message format (GATEWAY GW-BACK-1, GW-CREATE-7 step 6), and the account id the
timer queue's URL is built from (GW-CREATE-7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from asya.store import LONG_DEADLINE_SECONDS
from asya_gateway.config import GatewayConfig
from asya_gateway.timers import MAX_DELAY_SECONDS, Timer, TimerMessageError, is_long_deadline, timer_delay

NOW = datetime(2026, 3, 1, 10, 0, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ahead", "delay"),
    [(-5.0, 0), (0.0, 0), (0.1, 1), (59.75, 60), (60.0, 60), (299.75, 300), (900.0, 900), (5000.0, 900)],
)
def test_gw_back_1_timer_delay_rounds_up_within_the_sqs_limit(ahead: float, delay: int) -> None:
    assert timer_delay(NOW + timedelta(seconds=ahead), NOW) == delay


def test_gw_back_1_deadlines_beyond_900_s_are_left_to_the_long_deadlines_sweep() -> None:
    assert LONG_DEADLINE_SECONDS == MAX_DELAY_SECONDS == 900
    assert not is_long_deadline(NOW + timedelta(seconds=900), NOW)
    assert is_long_deadline(NOW + timedelta(seconds=900.001), NOW)


def test_gw_back_1_timer_body_round_trips() -> None:
    timer = Timer("t1", "2026-03-01T10:05:00Z")
    assert timer.to_body() == '{"id":"t1","deadline_at":"2026-03-01T10:05:00Z"}'
    assert Timer.from_body(timer.to_body()) == timer
    assert timer.deadline == datetime(2026, 3, 1, 10, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("nope", "timer body is not JSON: 'nope'"),
        ("[1]", "timer body must be a JSON object, got '[1]'"),
        ('{"deadline_at": "2026-03-01T10:05:00Z"}', "timer field id must be a non-empty string, got None"),
        ('{"id": "", "deadline_at": "2026-03-01T10:05:00Z"}', "timer field id must be a non-empty string, got ''"),
        ('{"id": "t1"}', "timer field deadline_at must be a timestamp, got None"),
        ('{"id": "t1", "deadline_at": "soon"}', "timer field deadline_at must be a timestamp, got 'soon'"),
    ],
)
def test_a_malformed_timer_body_names_the_field_and_value(body: str, message: str) -> None:
    with pytest.raises(TimerMessageError) as info:
        Timer.from_body(body)
    assert str(info.value) == message


def test_gw_create_7_the_timer_queue_url_needs_the_account_id_from_the_environment() -> None:
    assert GatewayConfig.from_env({}).account_id == ""
    assert GatewayConfig.from_env({"ASYA_ACCOUNT_ID": "123456789012"}).account_id == "123456789012"
