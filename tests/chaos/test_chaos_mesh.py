"""The short ``make chaos``: every fault of the injector at once, on the local mesh, with a few dozen tasks over
fan-out, retries, deadlines and cancels; the checker must find no violation of P-ACK-7's guarantee (P-STAT-2,
P-ACK-2, P-ACK-8, P-FAN-3). About a minute on 2 cores; ``make chaos`` runs the full matrix with 1,000 tasks.

Sixteen tasks of seed 25 hold every kind the guarantee is checked over: fan-outs of two or three parts, compiled
flow (``calc``) tasks, a task that overruns its deadline, canceled tasks and SSE-followed tasks (which the gateway
restarts cut); the test asserts the plan does, so a change of ``plan_tasks`` cannot drop a kind unnoticed. Every
fault is on at the all-faults rates; the run settles as soon as every queue is empty."""

from __future__ import annotations

import pytest

from chaos.checker import PROPERTIES
from chaos.run import Scenario, run_scenario
from chaos.scenarios import scenarios
from chaos.workload import plan_tasks

pytestmark = pytest.mark.chaos


_TASKS = 16
_SEED = 25


def test_p_ack_7_the_guarantee_holds_under_every_fault_at_once() -> None:
    plans = plan_tasks(_TASKS, seed=_SEED)
    assert {p.flow for p in plans} == {"fan", "calc", "late"}
    assert any(p.flow == "fan" and p.payload["parts"] > 1 for p in plans)
    assert any(p.cancel_after is not None for p in plans)
    assert any(p.follow for p in plans)
    together = next(s for s in scenarios(all_tasks=_TASKS, single_tasks=0) if s.name == "all")
    # the budget is a failure guard, not a target: the workload returns once every task is terminal (well under a
    # minute on an idle box), and a loaded one must not run out of it
    result = run_scenario(Scenario("all", together.rates, _TASKS), seed=_SEED, budget_seconds=600, settle_seconds=120)
    assert result.tasks == _TASKS
    assert result.errors == []
    # the faults were really played, and the workload really had retries, fan-out children and terminal tasks
    assert sum(result.played.values()) > 0, result.played
    assert result.handler_calls > result.tasks
    assert set(result.outcomes) <= {"succeeded", "failed", "canceled"}, result.outcomes
    failing = {PROPERTIES[name]: found[:5] for name, found in result.violations.items() if found}
    assert failing == {}
