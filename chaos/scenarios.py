"""The scenarios of ``make chaos``: each fault alone, then all of them together (the 1,000-task row).

Rates are per opportunity: per handler call (handler errors, crashes before the sends, expired visibility), per
send (send failures, duplicates, crashes after frame 0 left), per DynamoDB call of an actor (throttling: a hop makes
about five), per x-sink ``PutObject``, per SSE follower whose stream went live (gateway restarts; a quarter of the
tasks are followed), per child envelope sent (late child copies), per task created (forged producer posts), per
``split`` call (crew SETs), per ``inc`` call (layer-header SETs) and per ``inc``/``double`` call (second
payloads). The all-faults row halves each single rate.
"""

from __future__ import annotations

from typing import Final

from chaos.faults import FaultRates
from chaos.run import Scenario

__all__ = ["SINGLE_RATES", "scenarios"]

SINGLE_RATES: Final = {
    "handler_error": 0.2,
    "crash_after_send": 0.1,
    "crash_before_send": 0.1,
    "lease_expiry": 0.1,
    "duplicate": 0.2,
    "dynamodb_throttle": 0.03,
    "s3_failure": 0.2,
    "send_failure": 0.1,
    "gateway_restart": 0.5,
    "late_child_copy": 0.3,
    "forged_status": 0.2,
    "crew_set": 0.2,
    "layer_set": 0.2,
    "second_payload": 0.1,
}


def scenarios(*, all_tasks: int, single_tasks: int) -> list[Scenario]:
    out = [Scenario(name, FaultRates.of({name: rate}), single_tasks) for name, rate in SINGLE_RATES.items()]
    together = FaultRates.of({name: rate / 2 for name, rate in SINGLE_RATES.items()})
    out.append(Scenario("all", together, all_tasks))
    return out
