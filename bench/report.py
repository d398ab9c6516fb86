"""``bench/REPORT.md`` from a results document: every figure with its target and whether it is met. Pure.

``render(results)`` only formats: it reads the document ``python -m bench`` writes to ``bench/results/latest.json``
and tolerates missing sections (a benchmark that was not run shows as "not measured").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from bench.targets import DEFAULT_CONFIG, Verdict, evaluate, get_path

__all__ = ["fmt", "fmt_money", "fmt_spread", "render", "table", "verdict_mark"]

_MESH_LINES: Final = (
    ("sqs_requests", "SQS requests"),
    ("dynamodb_writes", "DynamoDB write units"),
    ("dynamodb_reads", "DynamoDB read units"),
    ("s3_requests", "S3 requests"),
    ("lambda_requests", "Lambda invocations"),
    ("lambda_duration", "Lambda duration the layer adds"),
)


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for a table: thousands separated, ``digits`` decimals (fewer for large values); ``-`` for none."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.{min(digits, 1)}f}"
    return f"{value:,.{digits}f}"


def fmt_money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def fmt_spread(summary: Mapping[str, Any] | None, digits: int = 1) -> str:
    """``median [p5-p95]`` of a ``bench.stats.Summary`` dictionary."""
    if not summary:
        return "-"
    return f"{fmt(summary['median'], digits)} [{fmt(summary['p5'], digits)}-{fmt(summary['p95'], digits)}]"


def verdict_mark(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "**not met**")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return [*lines, ""]


def _verdict_rows(verdicts: Sequence[Verdict]) -> list[list[str]]:
    return [
        [
            v.section,
            v.title,
            f"{fmt(v.value)} {v.unit}".rstrip() if v.value is not None else "-",
            v.target,
            verdict_mark(v.met),
        ]
        for v in verdicts
    ]


def _section_verdicts(verdicts: Sequence[Verdict], section: str) -> list[str]:
    rows = [row[1:] for row, v in zip(_verdict_rows(verdicts), verdicts, strict=True) if v.section == section]
    return table(["figure", "measured", "target", "verdict"], rows) if rows else []


def _overhead(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 1. Sidecar overhead per envelope", ""]
    data = results.get("overhead")
    if not data:
        return [*out, "Not measured.", ""]
    out += [
        "CPU time of one warm `ActorRuntime` per envelope (batches of 10 tracked envelopes, progress `hops`, trivial",
        "handler) against calling the handler directly, in µs, median [p5-p95]. `fake`: AWS clients replaced by",
        "in-memory fakes (the layer alone, plus the fakes' own small cost); `botocore`: real boto3 clients answered in",
        "memory, so botocore's request building is included.",
        "",
    ]
    rows = []
    for kind in ("fake", "botocore"):
        for case in data.get(kind, {}).values():
            calls = ", ".join(f"{k} {fmt(v, 1)}" for k, v in case["calls_per_envelope"].items())
            rows.append(
                [
                    kind,
                    f"{fmt(case['payload_bytes'] / 1024, 1)} KB",
                    str(case["batches"]),
                    fmt_spread(case["layer_us"]),
                    fmt_spread(case["direct_us"], 2),
                    fmt_spread(case["overhead_us"]),
                    calls,
                ]
            )
    out += table(
        ["clients", "payload", "batches", "layer", "handler alone", "overhead", "AWS calls per envelope"], rows
    )
    out += _section_verdicts(verdicts, "1")
    profile = data.get("profile", {})
    if profile:
        out += [
            "Where the layer's time goes (`cProfile` CPU self time by module, separate untimed pass, `fake` clients, "
            "garbage collection paused):",
            "",
        ]
        out += table(
            ["payload", "largest shares"],
            [[name, ", ".join(f"{k} {v:.0%}" for k, v in shares.items())] for name, shares in profile.items()],
        )
    return out


def _ab(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    data = results.get("ab")
    if not data:
        return []
    base = data["baseline"]
    out = [
        "## 1b. This build against the baseline build (A/B, interleaved)",
        "",
        f"The baseline is `{base['ref']}` ({base['commit'][:10]}), its runtime packages run from a `git archive` under",
        "this tree's harness (`bench/ab.py`). Overhead: two warm worker processes, fake clients, 1 KB payload, chunks",
        "of batches asked of each in turn (order swapped every round); µs per envelope, median [p5-p95]. Cold import:",
        "fresh processes of each target interleaved; ms, median [p5-p95].",
        "",
    ]
    rows = []
    overhead = data.get("overhead")
    if overhead:
        for side in ("baseline", "current"):
            rows.append([f"overhead per 1 KB envelope, {side}", fmt_spread(overhead[side]) + " µs"])
        rows.append(["overhead, current / baseline", f"{fmt(overhead['current_over_baseline'])} x"])
    coldstart = data.get("coldstart")
    if coldstart:
        for name in ("boto3", "baseline", "current"):
            rows.append([f"import time, {name}", fmt_spread(coldstart["ms"][name]) + " ms"])
        for side in ("baseline", "current"):
            rows.append([f"actor import / boto3 import, {side}", f"{fmt(coldstart[f'{side}_over_boto3'])} x"])
    return out + table(["figure", "measured"], rows)


def _traffic(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 2. AWS requests per hop and per task", ""]
    data = results.get("traffic")
    if not data:
        return [*out, "Not measured.", ""]
    sample = next(iter(data.values()))
    out += [
        f"{sample['tasks']} tasks of `text-pipeline` (normalize -> analyze -> summarize -> x-sink) per configuration",
        "on the local mesh, pollers driven one actor at a time so batches are full; every call the gateway, the layer,",
        "the crew and the pollers made was metered with botocore hooks and billed by AWS's rules (`bench/units.py`).",
        "An envelope-hop is one envelope handled by one actor Lambda (x-sink included). Empty receives are left out.",
        "",
    ]
    rows = []
    for cfg in data.values():
        services = cfg["services"]

        def per_hop(service: str, key: str, services: Mapping[str, Any] = services) -> float | None:
            value = get_path(services, service, "per_hop", key)
            return float(value) if value is not None else None

        def per_task(service: str, key: str, services: Mapping[str, Any] = services) -> float | None:
            value = get_path(services, service, "per_task", key)
            return float(value) if value is not None else None

        rows.append(
            [
                str(cfg["batch_size"]),
                cfg["progress"] + (" + history" if cfg.get("history", "off") != "off" else ""),
                fmt(per_hop("sqs", "billed_requests")),
                fmt(per_hop("dynamodb", "wru")),
                fmt(per_hop("dynamodb", "rru")),
                fmt(per_task("sqs", "billed_requests")),
                fmt(per_task("dynamodb", "wru")),
                f"{fmt(per_task('dynamodb', 'wru_table'), 1)} / {fmt(per_task('dynamodb', 'wru_index'), 1)}",
                fmt(per_task("dynamodb", "rru")),
                fmt(per_task("s3", "s3_tier1")),
                fmt(cfg["lambda_invocations_per_task"]),
            ]
        )
    out += table(
        [
            "batch",
            "progress",
            "SQS req/hop",
            "WRU/hop",
            "RRU/hop",
            "SQS req/task",
            "WRU/task",
            "WRU table / index",
            "RRU/task",
            "S3 PUT/task",
            "Lambda inv./task",
        ],
        rows,
    )
    out += _section_verdicts(verdicts, "2")
    out += _budget(data)
    default = data.get(DEFAULT_CONFIG)
    if default:
        tasks = default["tasks"]
        out += ["Every operation at batch 10, progress `hops`, per task (all components):", ""]
        op_rows = []
        for operation, usage in default["operations"].items():
            requests = usage["requests"] - usage["empty_receives"]
            if requests == 0:
                continue
            units = []
            if usage["wru"]:
                units.append(f"{fmt(usage['wru'] / tasks)} WRU ({fmt(usage['wru_index'] / tasks)} index)")
            if usage["rru"]:
                units.append(f"{fmt(usage['rru'] / tasks)} RRU")
            if usage["billed_requests"] != usage["requests"] and operation.startswith("sqs"):
                units.append(f"{fmt((usage['billed_requests'] - usage['empty_receives']) / tasks)} billed")
            op_rows.append([operation, fmt(requests / tasks), ", ".join(units)])
        out += table(["operation", "requests/task", "units/task"], op_rows)
        out += ["By component, per task (requests; DynamoDB write units):", ""]
        comp_rows = []
        for component, services in default["components"].items():
            cells = []
            for service, usage in services.items():
                requests = usage["requests"] - usage["empty_receives"]
                if not requests:
                    continue
                extra = f", {fmt(usage['wru'] / tasks)} WRU" if usage["wru"] else ""
                cells.append(f"{service} {fmt(requests / tasks)}{extra}")
            invocations = default["invocations"].get(component)
            batch = default.get("mean_batch", {}).get(component)
            comp_rows.append(
                [
                    component,
                    "; ".join(cells),
                    "-" if invocations is None else f"{invocations} ({fmt(batch, 1)} records each)",
                ]
            )
        out += table(["component", "calls per task", "invocations"], comp_rows)
        reads = default.get("dynamodb_reads_per_invocation", {})
        if reads:
            cells = [
                f"{c}: " + (", ".join(f"{op} {fmt(n)}" for op, n in ops.items()) or "none") for c, ops in reads.items()
            ]
            out += ["DynamoDB reads per actor invocation: " + "; ".join(cells) + ".", ""]
    return out


#: GW-DATA-8's budget lines: (title, target text, threshold, how to read the figure off one configuration).
_BUDGET: Final = (
    ("DynamoDB write units per task, table + indexes", "<= 6", 6.0, ("services", "dynamodb", "per_task", "wru")),
    ("DynamoDB write requests per intermediate hop", "exactly 1", 1.0, ("dynamodb_write_requests_per_hop",)),
    ("DynamoDB read units per hop", "<= 1", 1.0, ("services", "dynamodb", "per_hop", "rru")),
    ("S3 PUT per task", "<= 0.2", 0.2, ("services", "s3", "per_task", "s3_tier1")),
    (
        "SQS requests per envelope-hop, create's send and timers excluded",
        "<= 0.3",
        0.3,
        ("sqs_per_hop_without_create",),
    ),
)


def _budget_value(cfg: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value = get_path(cfg, *path)
    if isinstance(value, Mapping):  # write requests per hop, by actor: the user actors' worst
        users = [float(v) for actor, v in value.items() if not str(actor).startswith("x-")]
        return max(users) if users else None
    return float(value) if isinstance(value, int | float) else None


def _budget(data: Mapping[str, Any]) -> list[str]:
    """The budget of GW-DATA-8 for every configuration, each line with its target and verdict. The budget is stated
    for batch 10 and progress `hops`; the other configurations show how far each setting moves it."""
    names = list(data)
    out = [
        "Budget of GW-DATA-8 per configuration; it is stated for batch 10, progress `hops`,",
        "a task that succeeds without FLY values. Reported apart, per task: the create's own `SendMessage` ("
        + ", ".join(f"{n} {fmt(get_path(data[n], 'sqs_create_per_task'))}" for n in names)
        + ") and the deadline timer's messages, sent and received ("
        + ", ".join(f"{n} {fmt(get_path(data[n], 'sqs_timers_per_task'))}" for n in names)
        + "); dollars per task include both.",
        "",
    ]
    rows = []
    for title, target, threshold, path in _BUDGET:
        cells = []
        for name in names:
            value = _budget_value(data[name], path)
            mark = "" if value is None else (" ✓" if value <= threshold + 1e-9 else " ✗")
            cells.append(f"{fmt(value)}{mark}")
        rows.append([title, target, *cells])
    return [*out, *table(["figure", "target", *names], rows)]


def _cost(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 3. Cost per million tasks", ""]
    data = results.get("cost")
    if not data:
        return [*out, "Not measured.", ""]
    configs = data.get("configs", {})
    default = configs.get(DEFAULT_CONFIG)
    steps = get_path(default or {}, "profile", "steps")
    out += [
        "Orchestration only: what AWS bills the mesh for one million `text-pipeline` tasks beyond the handlers' own",
        "work, from the meter (section 2) and `bench/prices.toml`. Lambda duration the layer adds is modelled: the",
        f"layer's CPU per envelope ({fmt(data['layer_cpu_ms'], 3)} ms with botocore, section 1) stretched to the",
        "function's vCPU share, plus an assumed wait per AWS call (see assumptions). Step Functions: the same",
        f"{steps if steps is not None else '?'} steps as Task states. Ingress (API Gateway, gateway Lambda or",
        "StartExecution) and storage are left out on both sides.",
        "",
    ]
    if default:
        mesh = default["mesh"]
        rows = [[label, fmt_money(mesh.get(key))] for key, label in _MESH_LINES]
        rows.append(["**total**", f"**{fmt_money(mesh['total'])}**"])
        out += ["Mesh at batch 10, progress `hops`:", ""]
        out += table(["line item", "USD per million tasks"], rows)
    rows = []
    for name, cfg in configs.items():
        express = ", ".join(f"{step}: {fmt(ratio)}x" for step, ratio in cfg["mesh_over_express"].items())
        provisioned = cfg.get("mesh_dynamodb_provisioned", {}).get("total")
        rows.append(
            [
                name,
                fmt_money(cfg["mesh"]["total"]),
                f"{fmt(cfg['standard_over_mesh'], 1)}x",
                express,
                fmt_money(provisioned),
                f"{fmt(cfg.get('standard_over_mesh_provisioned'), 1)}x",
            ]
        )
    out += table(
        [
            "configuration",
            "mesh",
            "Standard / mesh",
            "mesh / Express by step duration",
            "mesh, DynamoDB provisioned",
            "Standard / that",
        ],
        rows,
    )
    out += [
        "The last two columns price the mesh's DynamoDB units at provisioned capacity used at "
        f"{fmt((data.get('assumptions') or {}).get('dynamodb_provisioned_utilization', 0.7) * 100, 0)}%: what a "
        "steady high-volume user pays (everything else as on demand).",
        "",
    ]
    if default:
        express_rows = [[step, fmt_money(value)] for step, value in default["sfn_express"].items()]
        out += [f"Step Functions Standard: {fmt_money(default['sfn_standard'])} per million tasks. Express:", ""]
        out += table(["step duration", "USD per million tasks"], express_rows)
    out += _waits(data.get("waits"))
    out += _section_verdicts(verdicts, "3")
    prices = data.get("prices", {})
    if prices:
        out += ["Prices (`bench/prices.toml`):", ""]
        out += table(
            ["price", "USD", "per", "region", "recorded", "source"],
            [
                [p["unit"], f"{p['price']:g}", f"{p['per']:,.0f}", p["region"], p["date"], p["source"]]
                for p in prices.values()
            ],
        )
    assumptions = data.get("assumptions")
    if assumptions:
        calls = ", ".join(f"{k} {v:g} ms" for k, v in assumptions["call_ms"].items())
        out += [
            f"Assumptions: wait per AWS call inside a Lambda {calls}; one vCPU at 1,769 MB; "
            f"{assumptions['sfn_transitions_per_step']} Standard transition per step; Express at "
            f"{assumptions['sfn_express_memory_mb']} MB.",
            "",
        ]
    return out


def _waits(data: Mapping[str, Any] | None) -> list[str]:
    """A flow's sleep or wait, priced from its request vector (``bench.waits``): the time itself is never billed."""
    if not data:
        return []
    rows = [
        [
            f"{row['seconds']:,} s",
            str(row["legs"]),
            fmt_money(row["mesh_usd"]),
            fmt_money(row["held_lambda_usd"]) if row["held_lambda_usd"] is not None else "not possible (> 900 s)",
            fmt_money(row["sfn_wait_usd"]),
        ]
        for row in data["rows"]
    ]
    out = [
        "A sleeping or waiting task holds no compute (`bench/waits.py`, from the requests of `asya_crew.resume`): one",
        f"x-resume leg per 900 s, none running between legs; a Lambda of {data['memory_mb']} MB holding the same wait",
        "pays every second of it; Step Functions Standard's `Wait` state is one transition.",
        "",
    ]
    return out + table(["wait", "legs", "mesh, USD per million", "a Lambda holding it", "Step Functions Wait"], rows)


def _cancel_reads(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    """Section 3's cancel reads of a generator hop (``bench/cancelreads.py``, P-CANCEL-5)."""
    data = results.get("cancelreads")
    if not data:
        return []
    out = [
        "### Cancel reads of a generator hop",
        "",
        "A generator handler's hop reads its task's status between yields, at most once every 5 s per invocation",
        "(P-CANCEL-3): one eventually consistent `GetItem`, 0.5 read unit, outside GW-DATA-8's one read per batch.",
        "Counted on the real layer (`bench/cancelreads.py`): one generator yielding every "
        f"{fmt(data['yield_seconds'], 1)} s of a fake clock, calls answered in memory. The example task's hops are",
        "plain functions under 5 s and make none: the rows above are unchanged; a flow pays these per generator hop.",
        "",
    ]
    rows = [
        [f"{seconds} s", fmt(row.get("reads"), 0), fmt(row.get("rru"), 1), fmt_money(row.get("usd_per_million"))]
        for seconds, row in data["hops"].items()
    ]
    out += table(["generator hop", "cancel reads", "read units", "USD per million such hops"], rows)
    return out


def _records(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    """Section 3's busy time per task of an async actor, records one at a time and at once (``bench/records.py``,
    P-PROC-1)."""
    data = results.get("records")
    if not data:
        return []
    out = [
        "### Busy time per task with concurrent records",
        "",
        "An `async def` handler awaiting "
        f"{fmt(data['wait_seconds'] * 1000, 0)} ms per record, batches of {data['batch_size']}, on the real layer",
        "with calls answered in memory (`bench/records.py`). Busy time: the invocation's wall time over its records,",
        "what one task's hop holds of the actor's concurrency (the capacity model's `busy`); `record_concurrency` 1",
        "runs the records one after another (the default), the batch size runs them at once (P-PROC-1). The calls",
        "differ in sends only: the outbox holds a frame at most 1 s, so ten sequential records need two",
        "`SendMessageBatch` calls and ten that end together one.",
        "",
    ]
    rows = []
    for key, row in data["settings"].items():
        calls = sum(row["calls_per_record"].values())
        rows.append(
            [
                key,
                fmt_spread(row["busy_ms_per_task"]),
                fmt_spread(row["cpu_ms_per_task"]),
                fmt(calls, 1),
            ]
        )
    out += table(["record_concurrency", "busy ms per task", "CPU ms per task", "AWS calls per record"], rows)
    return out


def _latency(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 4. Local latency and throughput", ""]
    data = results.get("latency")
    if not data:
        return [*out, "Not measured.", ""]
    low, sat, moto = data["low_load"], data["saturation"], data["moto_requests_per_second"]
    moto_ms = 1000 / moto["1_threads"] if moto.get("1_threads") else None
    out += [
        f"The example mesh (batch size {data['batch_size']}, progress `hops`) on moto's server: moto in its own",
        "process, everything else in this one. End to end: client wall time from the create request to the terminal",
        "status read over SSE (the gateway reads the task item every 250 ms while it changes, which this includes).",
        "Hop latency: that time over the task's envelope-hops (the store logs no item per status change, so the gaps",
        "between hops are not read back one by one).",
        "",
    ]
    out += table(
        ["figure", "measured"],
        [
            [f"hop latency, {low['tasks']} tasks at low load (ms)", fmt_spread(low["hop_ms"])],
            ["create -> terminal status over SSE (ms)", fmt_spread(low["e2e_ms"])],
            [
                f"throughput, {sat['tasks']} tasks from {sat['creators']} clients",
                f"{fmt(sat['tasks_per_second'])} tasks/s ({fmt(sat['seconds'], 1)} s)",
            ],
            ["AWS requests per task in that run (idle polls included)", fmt(sat["aws_requests_per_task"], 1)],
            [
                "CPU busy in that run: moto's process / the mesh's process",
                f"{_percent(sat.get('moto_cpu_busy'))} / {_percent(sat.get('mesh_cpu_busy'))}",
            ],
            [
                "moto request rate, same run (1 / 4 client threads)",
                f"{fmt(moto.get('1_threads'), 0)} / {fmt(moto.get('4_threads'), 0)} req/s",
            ],
            ["one moto request, 1 thread (ms)", fmt(moto_ms)],
            ["moto ceiling: best request rate / requests per task", f"{fmt(data['ceiling_tasks_per_second'])} tasks/s"],
        ],
    )
    out += _section_verdicts(verdicts, "4")
    if moto_ms:
        out += [
            f"A hop at p50 costs {fmt(low['hop_ms']['median'] / moto_ms, 1)} moto round trips; throughput reached "
            f"{fmt(sat['tasks_per_second'] / data['ceiling_tasks_per_second'] * 100, 0)}% of moto's ceiling.",
            "",
        ]
    return out


def _percent(share: float | None) -> str:
    return "not measured" if share is None else f"{share * 100:.0f}%"


def _coldstart(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 5. Cold start (import time)", ""]
    data = results.get("coldstart")
    if not data:
        return [*out, "Not measured.", ""]
    out += [
        f"`python -X importtime` of `import <module>` in fresh processes, self times summed, {data['runs']} runs each",
        f"interleaved, bytecode cached, imported from {data.get('depths', 1)} different stack depths (CPython 3.11's",
        "cost depends on it: `bench/coldstart.py`); ms, median [p5-p95].",
        "",
    ]
    rows = []
    for name, target in data["targets"].items():
        top = ", ".join(f"{k} {fmt(v, 1)}" for k, v in list(target["top_packages"].items())[:5])
        rows.append([name, f"`{target['module']}`", fmt_spread(target["ms"]), top])
    out += table(["target", "module", "ms", "largest packages (ms)"], rows)
    out += _section_verdicts(verdicts, "5")
    without = data.get("actor_without_layer_bytecode")
    if without:
        out += [
            "The layers the CDK app builds ship no bytecode (`pip --no-compile`, `*.pyc` excluded) and `/opt` is",
            f"read-only, so a deployed actor compiles {', '.join(without['layer_packages'])} at every cold start: "
            f"+{fmt(without['compile_penalty_ms'], 0)} ms, about {fmt(without['estimated_ms'], 0)} ms in all "
            f"({fmt(without['estimated_ms'] / data['targets']['boto3']['ms']['median'])}x boto3).",
            "",
        ]
    return out


def _memory(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 6. Memory", ""]
    data = results.get("memory")
    if not data:
        return [*out, "Not measured.", ""]
    out += [
        f"One fresh actor process, {data['batches']} batches of 10 x {fmt(data['payload_bytes'] / 1024, 0)} KB "
        "payloads, in-memory AWS clients, boto3 clients for SQS, DynamoDB and S3 resident: peak RSS "
        f"{fmt(data['peak_rss_after_startup_mb'], 1)} MB after start-up, {fmt(data['peak_rss_mb'], 1)} MB at the end.",
        "",
    ]
    return out + _section_verdicts(verdicts, "6")


def _agents(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 8. MCP tools/call against REST", ""]
    data = results.get("agents")
    if not data:
        return [*out, "Not measured.", ""]
    rest, mcp, over = data["rest"], data["mcp"], data["mcp_over_rest"]
    out += [
        f"{rest['tasks']} `text-pipeline` tasks one after another through REST (create, then SSE to the terminal "
        "status), then as many through one MCP session's streamed `tools/call` (`bench/agents.py`), on one local "
        "mesh; every AWS call metered. Per task:",
        "",
    ]

    def calls(phase: Mapping[str, Any]) -> str:
        return ", ".join(f"{k} {fmt(v)}" for k, v in phase["requests_per_task"].items())

    out += table(
        ["path", "AWS requests", "DynamoDB write units", "wall time (ms, median)"],
        [
            ["REST create + SSE", calls(rest), fmt(rest["wru_per_task"]), fmt(rest["wall_ms"]["median"], 0)],
            ["MCP tools/call", calls(mcp), fmt(mcp["wru_per_task"]), fmt(mcp["wall_ms"]["median"], 0)],
            [
                "**MCP overhead**",
                f"{over['requests_per_task']:+.2f}",
                f"{over['wru_per_task']:+.2f}",
                f"{over['wall_ms_median']:+.0f}",
            ],
        ],
    )
    return out


def _fanin(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 7. Fan-in", ""]
    data = results.get("fanin")
    if not data:
        return [*out, "Not measured.", ""]
    out += [
        "One `documents` task per size on a fresh local mesh (`bench/fanin.py`): `chunk` yields N chunks, so the "
        "aggregator `x-fanin-chunk` stores and counts N + 1 slices (P-AGG-3: a conditional slice put and a sharded "
        "set-add each), then claims, reads back, merges and emits once (P-AGG-4). The aggregator's own calls only "
        "(the poller's receive and delete are the ESM's); write units are exact (shadow reads).",
        "",
    ]
    rows = [
        [
            str(size["slices"]),
            str(size["requests"]),
            fmt(size["requests_per_slice"]),
            str(size["wru"]),
            fmt(size["wru_per_slice"]),
            fmt(size["aggregator_seconds"], 1),
            fmt(size["ms_per_slice"], 1),
        ]
        for size in data["sizes"].values()
    ]
    out += table(["slices", "requests", "per slice", "write units", "per slice", "aggregator s", "ms per slice"], rows)
    ratios = data.get("linearity", {})
    out += [
        "Linearity (per-slice figure at the largest size / at the smallest; 1.00 = linear): requests "
        f"x{fmt(ratios.get('requests_per_slice'))}, write units x{fmt(ratios.get('wru_per_slice'))}, wall time "
        f"x{fmt(ratios.get('ms_per_slice'))}.",
        "",
    ]
    return out + _section_verdicts(verdicts, "7")


def _flows(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 11. Flows written as Python", ""]
    data = results.get("flows")
    if not data:
        return [*out, "Not measured.", ""]
    out += [
        "One task of `flows/bench_cost.py` (a branch, a loop of 3 iterations, a 3-way fan-out) on a fresh local mesh "
        "(`bench/flows.py`). Its tests, mutations and fan-out run as continuations inside the layer (P-FLOW-3); the "
        "upstream-style figures add, for each control node the same run executed, one router hop, one invocation "
        "and the write units of one measured actor hop.",
        "",
    ]
    upstream = data["upstream"]
    rows = [
        ["compiled continuations", str(data["hops"]), str(data["invocations"]), fmt(data["wru"], 0)],
        ["upstream-style routers", str(upstream["hops"]), str(upstream["invocations"]), fmt(upstream["wru"], 0)],
    ]
    out += table(["per task", "hops", "Lambda invocations", "write units"], rows)
    out += [f"Control nodes run inside the layer: {data['control_nodes_run']}; extra hops for them: 0.", ""]
    if data.get("handed_back"):
        out += [
            f"The fan-out's slices run in invocations of their own (P-MAP-3): {data['handed_back']} records were "
            "handed back to their queue, which counts in the invocations, not in the hops.",
            "",
        ]
    parallel = data.get("parallel_map")
    if parallel:
        out += [
            f"A map of {parallel['slices']} slices of a {fmt(parallel['slice_seconds'], 1)} s handler whose "
            f"`batch_size` is {parallel['batch_size']} (`flows/bench_map.py`, `bench/maps.py`; P-MAP-3): the slices "
            "run at the same time in separate invocations.",
            "",
        ]
        rows = [
            ["in turn (one invocation, before P-MAP-3)", fmt(parallel["in_turn_seconds"], 2)],
            ["at the same time", fmt(parallel["wall_seconds"], 2)],
            ["bounded, `max_concurrency=5` (P-MAP-2)", fmt(parallel["bounded_5_wall_seconds"], 2)],
        ]
        out += table(["map of 10 slices", "wall time (s), first start to last end"], rows)
    return out


_E2E_ROWS: Final = (
    ("unwatched", "unwatched: API Gateway + create invocation + orchestration (batch 10)"),
    ("trickle", "unwatched, trickle (one task at a time: batch 1)"),
    ("sse_today", "watched over SSE, today (1024 MB, a stream per task, strong queries)"),
    ("sse_new", "watched over SSE, new (128 MB stream function, `?ids=`)"),
    ("sse_new_many", "watched over SSE, new, 50 tasks per stream"),
    ("trickle_sse_new", "trickle, watched over SSE, new"),
    ("mcp_today", "MCP `tools/call`, today (1024 MB)"),
    ("mcp_new", "MCP `tools/call`, new (128 MB stream function)"),
    ("polled", "polled: `GET` every 2 s (1024 MB main function)"),
    ("sfn_standard", "Step Functions Standard, unwatched (API Gateway + transitions)"),
    ("sfn_standard_watched", "Step Functions Standard, `DescribeExecution` every 2 s"),
    ("sfn_express", "Step Functions Express, unwatched"),
    ("sfn_express_watched", "Step Functions Express, watched (`StartSyncExecution`: no extra cost)"),
)


def _watching(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 9. Watching and end to end", ""]
    data = results.get("watching")
    e2e = get_path(results, "cost", "end_to_end")
    if not data or not e2e:
        return [*out, "Not measured (needs `traffic` and `watching`).", ""]
    speedups = ", ".join(f"{d} s x{v:g}" for d, v in data["speedup"].items())
    out += [
        "What a user pays per million tasks, ingress and watching included on both sides (`bench/watching.py`,",
        "`bench/endtoend.py`). A driver plays tasks of 1, 10 and 60 s (three hop claims, then `succeeded`) into moto",
        "while a client follows them over HTTP; the gateway's reads are metered exactly. A stream's Lambda duration",
        "is the task's duration plus the measured lag from the last write to the stream's end, at the serving",
        "function's memory: **today** a stream per task on the 1,024 MB gateway, one strongly consistent query per",
        "poll (MCP and A2A waits use this follower too); **new** `GET /api/v1/mesh/events?ids=` on the 128 MB stream",
        "function, one eventually consistent `BatchGetItem` per poll, shared by every task on it. Time compression",
        f"(cadence and tasks together, so poll counts are real ones): {speedups}. Ingress: API Gateway "
        f"(${fmt(get_path(results, 'cost', 'prices', 'apigw_rest_request', 'price'))} per million requests) and the",
        f"create invocation ({fmt(data['create']['wall_ms'], 0)} ms measured locally, at 1,024 MB). Polled: "
        f"a view `GET` is {fmt(data['view']['wall_ms'], 0)} ms and {fmt(data['view']['read_units'], 1)} read units.",
        "",
    ]
    header = ["task", "today", "new, 1 task", "new, 50 per stream (per task)", "today / new", "50 / 1"]
    rows = []
    for seconds, row in e2e["rows"].items():
        run = data["durations"][seconds]
        many_rru = run["new_many"]["read_units"] / run["new_many"]["tasks"]
        rows.append(
            [
                f"{seconds} s",
                f"{fmt_money(row['watch_today'])} ({fmt(run['today']['read_units'], 1)} RRU)",
                f"{fmt_money(row['watch_new'])} ({fmt(run['new_1']['read_units'], 1)} RRU)",
                f"{fmt_money(row['watch_new_many_per_task'])} ({fmt(many_rru, 1)} RRU)",
                f"{fmt(row['today_over_new'])} x",
                fmt(row["many_over_one"], 3),
            ]
        )
    out += ["Watching alone (the stream's Lambda duration and invocation, and its reads), USD per million tasks:", ""]
    out += table(header, rows)
    out += ["", "End to end, USD per million tasks:", ""]
    durations = list(e2e["rows"])
    rows = [[label, *(fmt_money(e2e["rows"][d].get(key)) for d in durations)] for key, label in _E2E_ROWS]
    out += table(["path", *(f"{d} s task" for d in durations)], rows)
    out.append("")
    return out + _section_verdicts(verdicts, "9")


def _streammem(results: Mapping[str, Any], verdicts: Sequence[Verdict]) -> list[str]:
    out = ["## 10. The stream function: memory and cold start", ""]
    data = results.get("streammem")
    if not data:
        return [*out, "Not measured.", ""]
    cold = data["cold_start_seconds"]
    out += [
        "One gateway process under uvicorn (as `run.sh` runs it), against moto in another process, serving one",
        f"`?ids=` stream for {fmt(data['hold_seconds'], 0)} s of polls (`bench/streammem.py`): RSS "
        f"{fmt(data['streaming']['VmRSS'], 1)} MB (peak {fmt(data['streaming']['VmHWM'], 1)} MB; "
        f"{fmt(data['idle']['VmRSS'], 1)} MB before the stream). A Lambda environment serves one invocation at a",
        "time, so this is what the function needs, plus the Web Adapter extension: 128 MB fits, with little room.",
        f"Cold start: importing the gateway and building the app takes {fmt(data['import_cpu_seconds'], 2)} s of CPU",
        "(median of fresh processes, this machine); at Lambda's CPU share (one vCPU at 1,769 MB) that is about",
        f"{fmt(cold['128'], 1)} s at 128 MB, {fmt(cold['256'], 1)} s at 256 MB and {fmt(cold['1024'], 1)} s at",
        "1,024 MB, a slow bound (it ignores any CPU boost during init). It is paid once per environment, not per",
        "stream; `Gateway(stream_memory=256)` halves it for twice the watching cost.",
        "",
    ]
    return out


def render(results: Mapping[str, Any], *, notes: Sequence[str] = ()) -> str:
    """The whole report; ``notes`` (markdown paragraphs) go in a closing "Findings" section."""
    verdicts = evaluate(results)
    meta = results.get("meta", {})
    met = sum(1 for v in verdicts if v.met)
    measured = sum(1 for v in verdicts if v.met is not None)
    lines = [
        "# Benchmarks",
        "",
        f"Written by `make bench` (`python -m bench`) on {meta.get('finished', '?')}, {meta.get('machine', '?')}; "
        f"whole run {fmt(meta.get('wall_seconds'), 0)} s. Medians with their spread [p5-p95]; ratios are measured "
        "side by side in one run. Raw figures: `bench/results/latest.json` (not committed).",
        "",
        f"## Summary: {met} of {measured} targets met",
        "",
    ]
    lines += table(["§", "figure", "measured", "target", "verdict"], _verdict_rows(verdicts))
    for section in (
        _overhead,
        _ab,
        _traffic,
        _cost,
        _cancel_reads,
        _records,
        _latency,
        _coldstart,
        _memory,
        _fanin,
        _agents,
        _watching,
        _streammem,
        _flows,
    ):
        lines += section(results, verdicts)
    if notes:
        lines += ["## Findings", ""]
        for note in notes:
            lines += [note, ""]
    return "\n".join(lines).rstrip() + "\n"
