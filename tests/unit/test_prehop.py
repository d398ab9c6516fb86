"""The steps before a handler call, written once (``asya.prehop``) for the layer, the routable crew and the
aggregator: route and hop-ceiling refusal (P-ROUTE-1, P-HOP-1), the pre-flight verdict (P-STAT-10), the SLA check
(P-TIME-3) and how a verdict is applied."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya import prehop, routing
from asya.envelope import Envelope, Reason, Route, Status
from asya.hops import DEFAULT_MAX_HOPS
from asya.timeutil import format_ts

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
TRACE = routing.Trace.for_hop({}, enabled=False)


def _env(*, curr: str = "a", deadline: datetime | None = None, headers: dict[str, Any] | None = None) -> Envelope:
    status = Status(phase="pending", actor=curr, attempt=1, max_attempts=1, created_at=format_ts(NOW))
    if deadline is not None:
        status.deadline_at = format_ts(deadline)
    return Envelope(id="t-1", route=Route(["s"], curr, ["b"]), payload={"x": 1}, headers=headers or {}, status=status)


def test_p_route_1_a_route_mismatch_is_refused_to_x_sump() -> None:
    verdict = prehop.refusal(_env(curr="other"), "a", DEFAULT_MAX_HOPS)
    assert verdict is not None and verdict.reason is Reason.ROUTE_MISMATCH and verdict.out is None
    assert "'other'" in verdict.message and "'a'" in verdict.message
    assert prehop.refusal(_env(), "a", DEFAULT_MAX_HOPS) is None


def test_p_hop_1_the_ceiling_is_checked_only_when_given() -> None:
    over = _env(headers={"x-asya-hops": 5})
    verdict = prehop.refusal(over, "a", 5)
    assert verdict is not None and verdict.reason is Reason.HOP_CEILING and verdict.message == "hop ceiling 5 reached"
    assert prehop.refusal(over, "a", 6) is None
    assert prehop.refusal(over, "a") is None, "the crew has no ceiling"


@pytest.mark.parametrize("status", ["canceled", "paused"])
def test_p_stat_10_a_stopped_task_goes_to_x_sink(status: str) -> None:
    verdict = prehop.preflight(_env(), status, actor="a", now=format_ts(NOW), trace=TRACE)
    assert verdict is not None and verdict.out is not None and verdict.reason is None
    assert verdict.out.actor == "x-sink" and verdict.out.envelope.status is not None
    assert verdict.out.envelope.status.phase == status


@pytest.mark.parametrize("status", ["duplicate", "succeeded", "failed"])
def test_p_stat_10_a_finished_task_or_a_duplicate_is_acked_as_it_is(status: str) -> None:
    verdict = prehop.preflight(_env(), status, actor="a", now=format_ts(NOW), trace=TRACE)
    assert verdict is not None and verdict.out is None and verdict.reason is None


@pytest.mark.parametrize("status", [None, "pending", "running", "claimed", "untracked"])
def test_p_stat_10_a_running_task_goes_on(status: str | None) -> None:
    assert prehop.preflight(_env(), status, actor="a", now=format_ts(NOW), trace=TRACE) is None


def test_p_time_3_less_than_one_second_to_the_deadline_goes_to_x_sink() -> None:
    def sla(left: timedelta) -> prehop.Verdict | None:
        env = _env(deadline=NOW + left)
        return prehop.sla(env, prehop.deadline_of(env), NOW, actor="a", now=format_ts(NOW), trace=TRACE)

    assert sla(prehop.SLA_MARGIN) is None, "exactly the margin left still runs"
    late = sla(prehop.SLA_MARGIN - timedelta(milliseconds=1))
    assert late is not None and late.out is not None and late.out.actor == "x-sink"
    assert late.out.envelope.status is not None and late.out.envelope.status.reason == Reason.TIMEOUT.value
    env = _env()
    assert prehop.sla(env, prehop.deadline_of(env), NOW, actor="a", now=format_ts(NOW), trace=TRACE) is None


def test_decide_sends_a_refusal_to_x_sump_with_the_input_payload_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    env = _env(curr="other")
    verdict = prehop.refusal(env, "a")
    assert verdict is not None
    sent: list[routing.Outgoing] = []
    with caplog.at_level(logging.INFO, logger="test.prehop"):
        prehop.decide(
            env,
            verdict,
            actor="a",
            now=format_ts(NOW),
            trace=TRACE,
            send=sent.append,
            logger=logging.getLogger("test.prehop"),
            new_id=lambda: "new",
        )
    [out] = sent
    assert out.actor == "x-sump" and out.envelope.status is not None
    assert out.envelope.status.reason == Reason.ROUTE_MISMATCH.value
    assert out.envelope.payload["original_payload"] == {"x": 1}
    [line] = caplog.records
    assert line.levelno == logging.ERROR and line.__dict__["error"] == verdict.message


def test_decide_acks_a_duplicate_without_a_send() -> None:
    verdict = prehop.preflight(_env(), "duplicate", actor="a", now=format_ts(NOW), trace=TRACE)
    assert verdict is not None
    sent: list[routing.Outgoing] = []
    prehop.decide(
        _env(), verdict, actor="a", now=format_ts(NOW), trace=TRACE, send=sent.append, logger=logging.getLogger("x")
    )
    assert sent == []
