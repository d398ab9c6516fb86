"""The capacity model calibrated on the local mesh past two caps (docs/capacity.md, "Calibration"): API Gateway's
stage throttle at 6 requests/s (burst 6), played in front of the local gateway, and an actor at ``max_concurrency:
2`` whose handler sleeps 0.5 s. Twice the stage rate is offered for 15 s from four client threads.

The model (``asya.capacity``: the stage's token bucket, the event source's cap under Little's law, with the busy time
per record measured on this machine first) predicts how many requests are answered 429 and how many tasks wait in
the actor's queue at the end. Counts are compared, never latencies: the 429s within 15% of the prediction (at least 4
requests), the backlog within 25% of the tasks the stage admitted, so a busy 2-core machine passes. Every refused
request carries ``Retry-After`` (the run fails on any other answer than 201 or such a 429).
"""

from __future__ import annotations

import json

import pytest

from bench import calibrate

pytestmark = pytest.mark.e2e


def test_calibration_predicts_429s_and_backlog_past_a_stage_throttle_and_a_capped_actor() -> None:
    result = calibrate.run(sleep_s=0.5, seconds=15.0, stage_rate=6.0, stage_burst=6, rate=12.0, clients=4)
    report = json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1)
    # both caps were passed: requests were refused and tasks waited
    assert result["observed_429"] > 0 and result["observed_backlog"] > 0, report
    assert abs(result["observed_429"] - result["predicted_429"]) <= result["tolerance"]["429"], report
    assert abs(result["observed_backlog"] - result["predicted_backlog"]) <= result["tolerance"]["backlog"], report
    assert result["within_tolerance"], report
