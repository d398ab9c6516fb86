"""``python -m bench``: run the benchmarks, write ``bench/results/latest.json`` and ``bench/REPORT.md``.

Options: ``--quick`` (fewer samples, for trying things out; the report says so), ``--only overhead,traffic,...``
(a subset; the cost model needs ``traffic``, and uses ``overhead`` when it ran), ``--report-only`` (re-render the
report from the last results), ``--baseline REF`` (the git ref the ``ab`` section measures against, see
:mod:`bench.ab`). Actor and gateway logs are kept to warnings (``POWERTOOLS_LOG_LEVEL``) unless the
environment sets a level; moto's per-request error tracebacks are not printed (creates it failed are retried and
counted in the report).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bench import cost
from bench.capacity import capacity_section, splice
from bench.findings import findings
from bench.report import render
from bench.targets import evaluate

BENCH_DIR: Final = Path(__file__).resolve().parent
RESULTS: Final = BENCH_DIR / "results" / "latest.json"
REPORT: Final = BENCH_DIR / "REPORT.md"
PRICES: Final = BENCH_DIR / "prices.toml"
SECTIONS: Final = (
    "overhead",
    "ab",
    "traffic",
    "latency",
    "coldstart",
    "memory",
    "fanin",
    "agents",
    "watching",
    "streammem",
    "flows",
    "cancelreads",
    "records",
)


def _runner(name: str, baseline: str | None = None) -> Callable[[bool], Any]:
    if name == "ab":
        from bench import ab

        return lambda quick: ab.run(baseline=baseline, quick=quick)
    if name == "overhead":
        from bench import overhead

        return lambda quick: overhead.run(quick=quick)
    if name == "traffic":
        from bench import traffic

        return lambda quick: traffic.run(quick=quick)
    if name == "latency":
        from bench import latency

        return lambda quick: latency.run(quick=quick)
    if name == "coldstart":
        from bench import coldstart

        return lambda quick: coldstart.run(runs=4 if quick else coldstart.IMPORT_DEPTHS)
    if name == "fanin":
        from bench import fanin

        return lambda quick: fanin.run(quick=quick)
    if name == "agents":
        from bench import agents

        return lambda quick: agents.run(quick=quick)
    if name == "flows":
        from bench import flows

        return lambda quick: flows.run(quick=quick)
    if name == "watching":
        from bench import watching

        return lambda quick: watching.run(quick=quick)
    if name == "cancelreads":
        from bench import cancelreads

        return lambda quick: cancelreads.run(quick=quick)
    if name == "records":
        from bench import records

        return lambda quick: records.run(quick=quick)
    if name == "streammem":
        from bench import streammem

        return lambda quick: streammem.run()
    from bench import memory

    return lambda quick: memory.run(batches=20 if quick else memory.BATCHES)


def cost_section(results: Mapping[str, Any], prices_text: str) -> dict[str, Any]:
    """The cost model over every metered configuration (needs ``traffic``)."""
    prices = cost.load_prices(prices_text)
    layer_us = results.get("overhead", {}).get("botocore", {}).get("1kb", {}).get("layer_us", {}).get("median")
    layer_cpu_ms = float(layer_us) / 1000 if layer_us is not None else 0.0
    configs = {}
    for name, traffic in results["traffic"].items():
        profile = cost.task_profile(traffic, layer_cpu_ms=layer_cpu_ms, call_ms=prices.call_ms)
        configs[name] = {**cost.compare(profile, prices), "profile": asdict(profile)}
    out: dict[str, Any] = {
        "layer_cpu_ms": layer_cpu_ms,
        "prices": {name: asdict(price) for name, price in prices.prices.items()},
        "assumptions": {
            "call_ms": dict(prices.call_ms),
            "sfn_transitions_per_step": prices.sfn_transitions_per_step,
            "sfn_express_memory_mb": prices.sfn_express_memory_mb,
            "sfn_step_seconds": list(prices.sfn_step_seconds),
            "dynamodb_provisioned_utilization": prices.dynamodb_provisioned_utilization,
        },
        "configs": configs,
    }
    from bench import waits

    out["waits"] = waits.table(prices)  # a sleeping or waiting task holds no compute (P-WAIT-3)
    if "watching" in results:
        from bench import endtoend

        out["end_to_end"] = endtoend.price(results["watching"], out, prices)
    return out


def price_cancel_reads(section: dict[str, Any], prices_text: str) -> None:
    """Each hop duration's cancel reads priced in place (``bench.cancelreads.price``)."""
    from bench import cancelreads

    prices = cost.load_prices(prices_text)
    for row in section["hops"].values():
        row.update(cancelreads.price(row["reads"], prices))


def _revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=BENCH_DIR, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=BENCH_DIR, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"
    return f"{head} with uncommitted changes" if dirty else head


def write_outputs(results: Mapping[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    report = render(results, notes=findings(results))
    # the capacity section is make capacity's (bench.capacity): kept as it is
    old = REPORT.read_text(encoding="utf-8") if REPORT.exists() else ""
    kept = capacity_section(old)
    REPORT.write_text(report if kept is None else splice(report, kept), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (figures less reliable)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    parser.add_argument("--baseline", default=None, help="git ref the ab section measures against")
    parser.add_argument("--report-only", action="store_true", help="re-render REPORT.md from the last results")
    args = parser.parse_args(argv)
    if args.report_only:
        write_outputs(json.loads(RESULTS.read_text(encoding="utf-8")))
        return 0
    selected = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(selected) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    # moto's server logs a traceback for every request it fails; the benchmarks count the failures they retry
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    started = time.monotonic()
    results: dict[str, Any] = {}
    for name in SECTIONS:
        if name not in selected:
            continue
        section_started = time.monotonic()
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        results[name] = _runner(name, args.baseline)(args.quick)
        print(f"bench: {name} done in {time.monotonic() - section_started:.0f} s", file=sys.stderr, flush=True)
    if "traffic" in results:
        results["cost"] = cost_section(results, PRICES.read_text(encoding="utf-8"))
    if "cancelreads" in results:
        price_cancel_reads(results["cancelreads"], PRICES.read_text(encoding="utf-8"))
    results["meta"] = {
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": time.monotonic() - started,
        "machine": f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.machine()}, {_revision()}"
        + (", --quick" if args.quick else ""),
        "quick": args.quick,
        "sections": selected,
    }
    write_outputs(results)
    for verdict in evaluate(results):
        mark = "-" if verdict.met is None else ("ok  " if verdict.met else "MISS")
        value = "-" if verdict.value is None else f"{verdict.value:.3g}"
        print(f"{mark} {verdict.title}: {value} {verdict.unit} (target {verdict.target})".rstrip())
    print(f"bench: wrote {REPORT.relative_to(BENCH_DIR.parent)} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
