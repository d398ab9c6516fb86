"""``make capacity`` (``python -m bench.capacity``): the capacity model's table in ``bench/REPORT.md``. Pure arithmetic.

For 100, 1,000, 10,000 and 100,000 tasks/s of the example flow (``text-pipeline``, 1 KB, batch 10, progress ``hops``,
unwatched) and for the manifest's declared target (``capacity``, its mix), with the settings ``asya synth`` would
derive for that rate and AWS's default quotas (plus ``deployment.quotas``): demand against every limit, the order in
which limits break and the first, a ramp from 0 to the rate in 60 s, and what the settings and the traffic cost per
hour (``bench/prices.toml``). The section sits between two markers and replaces only itself.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from asya.capacity import (
    CapacityPlan,
    Vector,
    account_quotas,
    declared,
    load_vector,
    plan,
    raised_quotas,
    simulate,
    vector_name,
)
from asya.capacity.plan import MEASURED_FLOW, mesh_demand
from asya.manifest import Manifest, parse_manifest
from bench import cost

__all__ = ["BEGIN", "END", "RATES", "capacity_section", "main", "render", "splice"]

RATES: Final = (100, 1_000, 10_000, 100_000)
BEGIN: Final = "<!-- capacity:begin (make capacity) -->"
END: Final = "<!-- capacity:end -->"
_BENCH: Final = Path(__file__).resolve().parent
_REPORT: Final = _BENCH / "REPORT.md"
_MANIFEST: Final = _BENCH.parent / "asya.yaml"
_PRICES: Final = _BENCH / "prices.toml"
_HOURS_PER_MONTH: Final = 730
#: Warm throughput and provisioned pollers are not in prices.toml's pages as of its date; these are estimates.
_WARM_WRU_PRICE: Final = 0.0000025  # USD per WRU/s of warm throughput, once (estimate)
_POLLER_HOUR_PRICE: Final = 0.0085  # USD per provisioned event poller hour (estimate)


def _at_rate(manifest: Manifest, rate: float, quotas: Mapping[str, float] | None = None) -> Manifest:
    """The manifest declaring ``rate`` for the measured flow alone (and ``quotas`` raised)."""
    data = manifest.model_dump(mode="json", exclude_none=True, exclude_unset=True)
    data = copy.deepcopy(data)
    data["capacity"] = {**data.get("capacity", {}), "target_rate": rate, "mix": {MEASURED_FLOW: 1.0}}
    if quotas:
        deployment = data.setdefault("deployment", {})
        deployment["quotas"] = {**deployment.get("quotas", {}), **quotas}
    return parse_manifest(data, base_dir=manifest.base_dir, source="capacity variant")


def _pool(result: CapacityPlan) -> float:
    """The rate at which the account's shared concurrency pool runs out."""
    return next((limit.max_rate for limit in result.limits if limit.source == "lambda_concurrency"), math.inf)


def _records_at_once(manifest: Manifest) -> Manifest:
    """The manifest with every user actor running its batch's records at once (``record_concurrency`` =
    ``batch_size``, async handlers, P-PROC-1)."""
    data = copy.deepcopy(manifest.model_dump(mode="json", exclude_none=True, exclude_unset=True))
    for name, spec in manifest.actors.items():
        data["actors"][name]["record_concurrency"] = spec.batch_size
    return parse_manifest(data, base_dir=manifest.base_dir, source="capacity variant")


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "none"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _limits_table(result: CapacityPlan) -> list[str]:
    rate = result.target_rate
    lines = [
        "| # | limit | source | demand | capacity | use | breaks at (tasks/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, limit in enumerate(result.limits, 1):
        mark = " **(first)**" if limit is result.first else ""
        est = " (estimate)" if limit.estimate else ""
        use = limit.demand(rate) / limit.capacity if limit.capacity else math.inf
        lines.append(
            f"| {n} | {limit.name}{mark}{est} | `{limit.source}` | {_fmt(limit.demand(rate))} {limit.unit} "
            f"| {_fmt(limit.capacity)} | {use:.0%} | {_fmt(limit.max_rate)} |"
        )
    return [*lines, ""]


def _cost_per_hour(result: CapacityPlan, prices: cost.PriceTable) -> dict[str, float]:
    rate = result.target_rate
    d = result.demand
    p = prices.prices
    seconds = 3600 * rate

    def unit(name: str) -> float:
        return float(p[name].price) / float(p[name].per)

    traffic = seconds * (
        (d.wru_table + sum(d.wru_index.values())) * unit("dynamodb_write_request_unit")
        + d.rru * unit("dynamodb_read_request_unit")
        + d.sqs_requests * unit("sqs_request")
        + sum(d.s3_puts_by_prefix.values()) * unit("s3_tier1_request")
        + d.lambda_invocations * unit("lambda_request")
        + d.stage_requests * unit("apigw_rest_request")
        + sum(d.busy_seconds.values()) * 0.25 * unit("lambda_arm_gb_second")
    )
    pollers = sum(v for v in result.settings.pollers.values() if v) * _POLLER_HOUR_PRICE
    warm = (result.settings.warm_wru or 0) * _WARM_WRU_PRICE
    return {"traffic": traffic, "pollers": pollers, "warm_once": warm}


def _ramp_line(result: CapacityPlan, manifest: Manifest, deadline: float) -> str:
    quotas = account_quotas(manifest)
    ramp = simulate(
        result.demand,
        result.settings,
        quotas,
        rate=result.target_rate,
        deadline_seconds=deadline,
        max_receive_count=manifest.defaults.max_receive_count,
    )
    steady = "never within 120 s" if ramp.seconds_to_steady is None else f"{ramp.seconds_to_steady} s"
    return (
        f"429s {_fmt(ramp.refused_requests)}, peak backlog {_fmt(ramp.max_backlog)} tasks, worst latency "
        f"{_fmt(ramp.max_latency)} s (deadline {deadline:g} s), timeouts predicted {_fmt(ramp.timeouts)}, "
        f"receives per message up to {ramp.max_receives:.1f} (DLQ {'predicted' if ramp.dlq else 'not predicted'}), "
        f"steady after {steady}"
    )


def render(manifest: Manifest, *, vectors: Mapping[str, Vector] | None = None) -> str:
    """The report section (markers included)."""
    prices = cost.load_prices(_PRICES.read_text(encoding="utf-8"))
    vector = (vectors or {}).get(vector_name(MEASURED_FLOW, "1kb", "off", False)) or load_vector(
        vector_name(MEASURED_FLOW, "1kb", "off", False)
    )
    wru = vector_config_units(vector)
    out = [
        BEGIN,
        "## Capacity: where the mesh breaks on AWS",
        "",
        "`make capacity` (`bench/capacity.py`, model `asya.capacity`, docs/capacity.md). Demand per task from the",
        f"committed vectors (`{MEASURED_FLOW}`, 1 KB, batch 10, progress `hops`, unwatched: {wru} write units and",
        f"{_fmt(vector_total(vector, 'rru'))} read units per task, metered on moto); quotas from",
        "`asya/capacity/quotas.toml` (AWS defaults, each with its page); settings as `asya synth` derives them for",
        "each rate. Handler time 0.2 s per record (an assumption); busy time per task and function follows from it",
        "and the calls' latency.",
        "",
        "| target (tasks/s) | first limit | breaks at | quotas to raise | traffic $/h | pollers $/h | warm "
        "throughput $ once |",
        "|---|---|---|---|---|---|---|",
    ]
    plans: list[tuple[str, CapacityPlan, Manifest]] = []
    for rate in RATES:
        variant = _at_rate(manifest, rate)
        result = plan(variant, vectors=vectors)
        plans.append((f"{rate:,}", result, variant))
        raised = raised_quotas(result)
        if raised:
            variant = _at_rate(manifest, rate, raised)
            plans.append((f"{rate:,} (quotas raised)", plan(variant, vectors=vectors), variant))
    own = "declared" if declared(manifest) else "the manifest default"
    plans.append((f"{manifest.capacity.target_rate:,.0f} ({own})", plan(manifest, vectors=vectors), manifest))
    for label, result, _ in plans:
        costs = _cost_per_hour(result, prices)
        hard = [
            f"{s.source} (hard limit)"
            for s in result.shortfalls
            if not s.source.startswith("setting:") and not result.quotas.quota(s.source).adjustable
        ]
        raise_ = ", ".join([*(f"{k} → {v:,.0f}" for k, v in raised_quotas(result).items()), *hard])
        out.append(
            f"| {label} | {result.first.name} | {_fmt(result.first.max_rate)} | {raise_ or '-'} "
            f"| ${costs['traffic']:,.2f} | ${costs['pollers']:,.2f} | ${costs['warm_once']:,.2f} |"
        )
    busy = plans[0][1].demand.busy_seconds
    off = plan(_at_rate(manifest, RATES[1]), vectors=vectors)
    on = plan(_records_at_once(_at_rate(manifest, RATES[1])), vectors=vectors)
    out += [
        "",
        "Busy time per task by function (Little's law: concurrency = rate x busy; handler time plus the calls' "
        "latency, an estimate): " + ", ".join(f"{fn} {seconds * 1000:,.0f} ms" for fn, seconds in sorted(busy.items())),
        "",
        "With concurrent records (`record_concurrency` = `batch_size` on every user actor, async handlers, P-PROC-1), "
        "a batch's handler time overlaps: "
        + ", ".join(f"{fn} {seconds * 1000:,.0f} ms" for fn, seconds in sorted(on.demand.busy_seconds.items()))
        + f". With the default quotas the Lambda account concurrency limit moves from {_fmt(_pool(off))} tasks/s "
        f"(records one at a time) to {_fmt(_pool(on))} tasks/s.",
    ]
    out += ["", "Ramp from 0 to the rate in 60 s, then 60 s at the rate (1 s steps; an estimate):", ""]
    for label, result, variant in plans:
        _, deadline = mesh_demand(variant, account_quotas(variant), vectors=vectors)
        out.append(f"- {label}: {_ramp_line(result, variant, deadline)}")
    out.append("")
    for label, result, _ in plans:
        out += [f"### {label} tasks/s: every limit, in the order it breaks", ""]
        s = result.settings
        out.append(
            f"Settings: stage {s.stage_rate:,.0f} requests/s (burst {s.stage_burst:,}), {s.index_shards} "
            f"created-index shards, warm throughput {s.warm_wru or '-'} WRU / {s.warm_rru or '-'} RRU, "
            f"pollers {({k: v for k, v in s.pollers.items() if v}) or '-'}, Retry-After {result.retry_after} s."
        )
        out.append("")
        out += _limits_table(result)
    out += [
        "Not limits of the mesh: CloudWatch Logs (Lambda delivers its functions' logs itself) and metrics (embedded",
        "in the logs, no PutMetricData calls). Log volume follows Lambda invocations per task "
        f"({_fmt(plans[0][1].demand.lambda_invocations)}).",
        "",
        END,
    ]
    return "\n".join(out) + "\n"


def vector_total(vector: Vector, name: str) -> float:
    return sum(row.get(name, 0.0) for row in vector.units.values())


def vector_config_units(vector: Vector) -> str:
    table = vector_total(vector, "wru_table")
    index = vector_total(vector, "wru_index")
    return f"{_fmt(table + index)} ({_fmt(table)} table + {_fmt(index)} index)"


def capacity_section(report: str) -> str | None:
    """The capacity section of ``report`` (markers included), or ``None``."""
    if BEGIN not in report or END not in report:
        return None
    start = report.index(BEGIN)
    return report[start : report.index(END, start) + len(END)] + "\n"


def splice(report: str, section: str) -> str:
    """``report`` with its capacity section replaced by ``section`` (appended when absent)."""
    if BEGIN in report and END in report:
        head, rest = report.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        return head + section.rstrip("\n") + tail
    return report.rstrip("\n") + "\n\n" + section


def load_example(path: Path = _MANIFEST) -> Manifest:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return parse_manifest(data, base_dir=path.parent, source=path.name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=_MANIFEST)
    parser.add_argument("--report", type=Path, default=_REPORT)
    parser.add_argument("--vectors", type=Path, default=None, help="a directory of vectors instead of the committed")
    args = parser.parse_args(argv)
    vectors = None
    if args.vectors is not None:
        vectors = {p.stem: load_vector(p.stem, args.vectors) for p in args.vectors.glob("*.json")}
    section = render(load_example(args.manifest), vectors=vectors)
    report = args.report.read_text(encoding="utf-8") if args.report.exists() else ""
    args.report.write_text(splice(report, section), encoding="utf-8")
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
