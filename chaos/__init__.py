"""The chaos harness (``make chaos``, ``tests/chaos``): faults injected into the local mesh at configurable rates, a
workload of tasks with fan-out, retries, deadlines and cancels, a recorder of every status clients observed and of
every handler call, and a checker of P-ACK-7's guarantee over the history and the final store (RELIABILITY.md).

Modules: :mod:`chaos.faults` (the injector), :mod:`chaos.actors` (the handler wrappers), :mod:`chaos.workload` (the
tasks and the recorder), :mod:`chaos.checker` (the properties), :mod:`chaos.run` (one scenario on a fresh mesh),
:mod:`chaos.scenarios` (the fault matrix), :mod:`chaos.report` (Markdown).
"""

from __future__ import annotations

from chaos.checker import PROPERTIES, History, check
from chaos.faults import FAULTS, FaultRates, FaultRatesError, Injector
from chaos.run import Scenario, ScenarioResult, run_scenario

__all__ = [
    "FAULTS",
    "PROPERTIES",
    "FaultRates",
    "FaultRatesError",
    "History",
    "Injector",
    "Scenario",
    "ScenarioResult",
    "check",
    "run_scenario",
]
