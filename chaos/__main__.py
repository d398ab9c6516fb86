"""``python -m chaos`` (``make chaos``): the fault matrix on the local mesh, bounded in time, written to a report.

Options: ``--tasks`` (the all-faults scenario, default 1000), ``--single-tasks`` (each one-fault scenario, default
40), ``--budget`` (seconds for the whole run, default 900: a scenario that would start past it is skipped and listed),
``--seed``, ``--only name,...`` (scenarios by name), ``--report`` (default ``chaos/REPORT.md``). Exit status 1 when
any property was violated or a scenario was skipped, 0 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from chaos.report import render
from chaos.run import ScenarioResult, run_scenario
from chaos.scenarios import scenarios

#: A scenario is started only with at least this many seconds of the budget left.
_MIN_SCENARIO_SECONDS = 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--single-tasks", type=int, default=40)
    parser.add_argument("--budget", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="")
    parser.add_argument("--report", type=Path, default=Path(__file__).resolve().parent / "REPORT.md")
    args = parser.parse_args(argv)
    # the ESM emulator logs every injected crash with its traceback: expected here, and thousands of lines
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # uvicorn.error: each gateway restart cancels the SSE streams still open, with an ERROR traceback each
    for noisy in ("asya_local.esm", "asya.store", "asya.store.taskstore", "urllib3.connectionpool", "uvicorn.error"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    chosen = scenarios(all_tasks=args.tasks, single_tasks=args.single_tasks)
    if args.only:
        names = set(args.only.split(","))
        chosen = [scenario for scenario in chosen if scenario.name in names]
    started = time.monotonic()
    results: list[ScenarioResult] = []
    skipped: list[str] = []
    for scenario in chosen:
        left = args.budget - (time.monotonic() - started)
        if left < _MIN_SCENARIO_SECONDS:
            skipped.append(scenario.name)
            continue
        print(f"chaos: {scenario.name} ({scenario.tasks} tasks, {left:.0f} s left)", file=sys.stderr, flush=True)
        result = run_scenario(scenario, seed=args.seed, budget_seconds=left - 45.0, settle_seconds=40.0)
        violations = sum(len(found) for found in result.violations.values())
        print(f"chaos: {scenario.name}: {violations} violation(s), {result.seconds:.0f} s", file=sys.stderr, flush=True)
        results.append(result)
    header = (
        f"Run: commit {_commit()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} "
        f"{platform.system()} (Python {platform.python_version()}, {os.cpu_count()} CPUs), "
        f"{time.monotonic() - started:.0f} s, seed {args.seed}."
    )
    args.report.write_text(render(results, header=header, skipped=skipped), encoding="utf-8")
    print(f"chaos: report written to {args.report}", file=sys.stderr)
    failed = skipped or any(not result.passed for result in results)
    return 1 if failed else 0


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
