"""``make bench``'s pure parts: statistics, target verdicts, the report and its findings (no timing here)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench import stats
from bench.findings import findings
from bench.report import fmt, fmt_money, fmt_spread, render, table, verdict_mark
from bench.targets import TARGETS, evaluate, get_path

pytestmark = pytest.mark.unit


# -- statistics -------------------------------------------------------------------------------------------------------


def test_percentiles_interpolate_between_closest_ranks() -> None:
    samples = [4.0, 1.0, 3.0, 2.0]
    assert stats.median(samples) == 2.5
    assert stats.percentile(samples, 0) == 1.0
    assert stats.percentile(samples, 100) == 4.0
    assert stats.percentile(samples, 25) == pytest.approx(1.75)
    assert stats.percentile([7.0], 95) == 7.0


def test_percentile_rejects_no_samples_and_bad_q() -> None:
    with pytest.raises(ValueError, match="no samples"):
        stats.percentile([], 50)
    with pytest.raises(ValueError, match="101"):
        stats.percentile([1.0], 101)


def test_summary_and_scaling() -> None:
    summary = stats.summarize([float(i) for i in range(1, 101)])
    assert (summary.n, summary.median, summary.min, summary.max) == (100, 50.5, 1.0, 100.0)
    assert summary.p5 == pytest.approx(5.95)
    assert summary.p95 == pytest.approx(95.05)
    assert summary.scaled(1000).median == 50_500.0
    assert summary.to_dict()["p95"] == summary.p95
    assert stats.ratio(3.0, 2.0) == 1.5
    assert stats.ratio(3.0, 0.0) is None


# -- a results document -----------------------------------------------------------------------------------------------


def _summary(median: float) -> dict[str, float]:
    return {"n": 10, "median": median, "p5": median * 0.9, "p95": median * 1.2, "min": median * 0.8, "max": median * 2}


def _usage(**values: float) -> dict[str, float]:
    base = dict.fromkeys(
        (
            "requests",
            "billed_requests",
            "empty_receives",
            "payload_bytes",
            "wru_table",
            "wru_index",
            "rru",
            "s3_tier1",
            "s3_tier2",
        ),
        0,
    )
    base.update(values)
    base["wru"] = base["wru_table"] + base["wru_index"]
    return base


def _traffic(*, sqs_per_hop: float, wru_per_hop: float, reads: dict[str, dict[str, float]]) -> dict[str, Any]:
    hops, tasks = 40, 10
    return {
        "sqs_per_hop_without_create": sqs_per_hop,
        "sqs_create_per_task": 1.0,
        "dynamodb_write_requests_per_hop": {"normalize": 1.0 if wru_per_hop <= 2 else 3.0, "x-sink": 2.0},
        "tasks": tasks,
        "envelope_hops": hops,
        "batch_size": 10,
        "progress": "hops",
        "invocations": {"normalize": 1, "x-sink": 1},
        "mean_batch": {"normalize": 10.0, "x-sink": 10.0},
        "lambda_invocations_per_task": 0.4,
        "services": {
            "sqs": {"per_hop": {"billed_requests": sqs_per_hop}, "per_task": {"billed_requests": sqs_per_hop * 4}},
            "dynamodb": {
                "per_hop": {"wru": wru_per_hop, "rru": 0.2},
                "per_task": {"wru": wru_per_hop * 4, "wru_table": wru_per_hop * 2, "wru_index": wru_per_hop * 2},
            },
            "s3": {"per_task": {"s3_tier1": 0.1 if wru_per_hop <= 2 else 1.0}},
        },
        "operations": {
            "sqs:SendMessageBatch": _usage(requests=30, billed_requests=30),
            "sqs:ReceiveMessage": _usage(requests=6, billed_requests=6, empty_receives=2),
            "dynamodb:UpdateItem": _usage(requests=40, billed_requests=40, wru_table=40, wru_index=80),
        },
        "components": {"normalize": {"sqs": _usage(requests=11, billed_requests=11)}},
        "dynamodb_reads_per_invocation": reads,
    }


def _results(*, good: bool) -> dict[str, Any]:
    case = {
        "payload_bytes": 1024,
        "batches": 100,
        "layer_us": _summary(90 if good else 250),
        "direct_us": _summary(0.2),
        "overhead_us": _summary(89.8 if good else 249.8),
        "calls_per_envelope": {"sqs:SendMessageBatch": 1.0},
    }
    configs = {
        "b10-hops": {
            "mesh": {
                "sqs_requests": 1.0,
                "dynamodb_writes": 2.0,
                "dynamodb_reads": 0.1,
                "s3_requests": 0.0 if good else 5.0,
                "lambda_requests": 0.1,
                "lambda_duration": 0.3,
                "total": 3.5 if good else 12.0,
            },
            "sfn_standard": 75.0,
            "sfn_express": {"0.1s": 1.31, "1s": 4.13, "10s": 32.26},
            "standard_over_mesh": 75.0 / (3.5 if good else 12.0),
            "mesh_over_express": {"0.1s": 2.7, "1s": 0.85 if good else 2.06, "10s": 0.1},
        }
    }
    reads = {"normalize": {"BatchGetItem": 1.0}} if good else {"normalize": {"BatchGetItem": 1.0, "GetItem": 10.0}}
    return {
        "meta": {"finished": "2026-01-01 00:00 UTC", "machine": "2 CPUs", "wall_seconds": 300.0},
        "overhead": {"fake": {"1kb": case}, "botocore": {}, "profile": {"1kb": {"asya.store": 0.3, "json": 0.2}}},
        "traffic": {
            "b10-hops": _traffic(sqs_per_hop=0.3 if good else 1.2, wru_per_hop=2.0 if good else 11.5, reads=reads)
        },
        "cost": {
            "layer_cpu_ms": 1.0,
            "configs": configs,
            "prices": {},
            "assumptions": None,
            # issue 27's watching targets and the end-to-end ratios (10 s task)
            "end_to_end": {
                "rows": {
                    "10": {
                        "today_over_new": 8.0 if good else 4.0,
                        "many_over_one": 0.08 if good else 0.3,
                        "unwatched": 20.0,
                        "sse_new": 40.0,
                        "sfn_standard": 78.5,
                        "sfn_standard_watched": 99.5,
                        "sfn_express": 30.0 if good else 15.0,
                        "sfn_express_watched": 50.0 if good else 15.0,
                    }
                }
            },
        },
        "latency": {
            "batch_size": 10,
            "low_load": {"tasks": 20, "hop_ms": _summary(20 if good else 45), "e2e_ms": _summary(300)},
            "saturation": {
                "tasks": 100,
                "creators": 4,
                "seconds": 2.0 if good else 25.0,
                "tasks_per_second": 50.0 if good else 4.0,
                "aws_requests_per_task": 27.0,
                **({} if good else {"moto_cpu_busy": 0.914, "mesh_cpu_busy": 0.35}),
            },
            "moto_requests_per_second": {"1_threads": 200.0, "4_threads": 110.0},
            "ceiling_tasks_per_second": 7.4,
        },
        "coldstart": {
            "runs": 5,
            "targets": {
                "boto3": {"module": "boto3", "ms": _summary(140), "top_packages": {"botocore": 30.0}},
                "actor": {
                    "module": "asya.sidecar",
                    "ms": _summary(200 if good else 230),
                    "top_packages": {"botocore": 30.0, "asya": 25.0, "aws_lambda_powertools": 20.0},
                },
            },
            "actor_over_boto3": (200 if good else 230) / 140,
            "tracer": {"tracers": 0, "xray_sdk_imported": False},
        },
        "ab": {
            "baseline": {"ref": "HEAD~1", "commit": "0" * 40},
            "overhead": {
                "current": _summary(100 if good else 200),
                "baseline": _summary(210),
                "current_over_baseline": (100 if good else 200) / 210,
            },
            "coldstart": {
                "ms": {"boto3": _summary(140), "current": _summary(170), "baseline": _summary(200)},
                "current_over_boto3": (170 if good else 200) / 140,
                "baseline_over_boto3": 200 / 140,
            },
        },
        "memory": {
            "batches": 100,
            "payload_bytes": 262144,
            "peak_rss_after_startup_mb": 60.0,
            "peak_rss_mb": 100.0 if good else 140.0,
        },
    }


# -- targets ----------------------------------------------------------------------------------------------------------


def test_every_target_is_met_by_a_good_run() -> None:
    verdicts = evaluate(_results(good=True))
    assert [v.key for v in verdicts if not v.met] == []
    assert len(verdicts) == len(TARGETS)


def test_misses_are_reported_with_their_values() -> None:
    verdicts = {v.key: v for v in evaluate(_results(good=False))}
    assert verdicts["overhead_1kb"].met is False and verdicts["overhead_1kb"].value == 249.8
    assert verdicts["sqs_per_hop"].met is False
    assert verdicts["wru_per_task"].met is False and verdicts["wru_per_task"].value == 46.0
    assert verdicts["writes_per_intermediate_hop"].met is False  # x-sink's writes are not an intermediate hop's
    assert verdicts["s3_put_per_task"].met is False
    assert verdicts["reads_per_batch"].value == 99.0  # a GetItem per hop is not the pre-flight read
    assert verdicts["cheaper_than_standard"].met is False
    assert verdicts["below_express_1s"].met is False
    assert verdicts["below_express_10s"].met is True
    assert verdicts["hop_p50"].met is False
    assert verdicts["throughput"].met is False
    assert verdicts["coldstart_ratio"].met is False
    assert verdicts["no_tracer"].met is True
    assert verdicts["peak_rss"].met is False
    assert verdicts["overhead_1kb_ab"].met is False and verdicts["coldstart_ab"].met is False


def test_a_benchmark_that_did_not_run_is_not_measured() -> None:
    results = _results(good=True)
    del results["memory"], results["traffic"]
    verdicts = {v.key: v for v in evaluate(results)}
    assert verdicts["peak_rss"].met is None and verdicts["peak_rss"].value is None
    assert verdicts["sqs_per_hop"].met is None
    assert get_path(results, "traffic", "b10-hops") is None


def test_threshold_boundaries_are_inclusive_where_the_issue_says_so() -> None:
    results = _results(good=True)
    results["traffic"]["b10-hops"]["services"]["sqs"]["per_hop"]["billed_requests"] = 0.3
    results["coldstart"]["actor_over_boto3"] = 1.5
    results["cost"]["configs"]["b10-hops"]["mesh_over_express"]["1s"] = 1.0  # "below": strictly
    verdicts = {v.key: v for v in evaluate(results)}
    assert verdicts["sqs_per_hop"].met is True
    assert verdicts["coldstart_ratio"].met is True
    assert verdicts["below_express_1s"].met is False


# -- formatting -------------------------------------------------------------------------------------------------------


def test_number_formatting() -> None:
    assert fmt(None) == "-"
    assert fmt(0.3) == "0.30"
    assert fmt(1234.5) == "1,234"
    assert fmt(123.456) == "123.5"
    assert fmt(2.0, 0) == "2"
    assert fmt_money(1234.5) == "$1,234.50"
    assert fmt_spread(_summary(100.0)) == "100.0 [90.0-120.0]"
    assert fmt_spread(None) == "-"
    assert verdict_mark(True) == "met"
    assert verdict_mark(False) == "**not met**"
    assert verdict_mark(None) == "not measured"
    assert table(["a", "b"], [["1", "2"]]) == ["| a | b |", "|---|---|", "| 1 | 2 |", ""]


def test_report_shows_every_figure_with_target_and_verdict() -> None:
    text = render(_results(good=False), notes=["**Note.** why."])
    assert text.startswith("# Benchmarks\n")
    assert "## Summary: 5 of 23 targets met" in text
    assert (
        "| 1 | Layer overhead per 1 KB envelope (median, batch of 10, in-memory AWS) | 249.8 µs | <= 100 µs |" in text
    )
    assert "**not met**" in text
    for heading in ("## 1. ", "## 2. ", "## 3. ", "## 4. ", "## 5. ", "## 6. ", "## Findings"):
        assert heading in text
    assert "| sqs:ReceiveMessage | 0.40 |" in text  # per task, empty receives left out
    assert "moto request rate" in text
    assert "| CPU busy in that run: moto's process / the mesh's process | 91% / 35% |" in text
    assert "| CPU busy in that run: moto's process / the mesh's process | not measured / not measured |" in render(
        _results(good=True)
    )
    assert "**Note.** why." in text
    assert "## 1b. This build against the baseline build (A/B, interleaved)" in text
    assert "| overhead, current / baseline | 0.95 x |" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_report_of_a_partial_run_says_what_was_not_measured() -> None:
    results = _results(good=True)
    for section in ("overhead", "ab", "traffic", "cost", "latency", "coldstart", "memory"):
        del results[section]
    text = render(results)
    assert "## Summary: 0 of 0 targets met" in text
    # the six sections above, fan-in, agents, the stream function's memory and flows, which _results leaves out
    assert text.count("Not measured.") == 10
    assert "Not measured (needs `traffic` and `watching`)." in text


def test_fanin_section_shows_each_size_per_slice_and_the_linearity_ratio() -> None:
    """Issue 16's bench: requests, write units and wall time for each size, per slice, and the ratio."""
    size = {
        "slices": 11,
        "requests": 29,
        "requests_per_slice": 29 / 11,
        "wru": 24,
        "wru_per_slice": 24 / 11,
        "aggregator_seconds": 0.66,
        "ms_per_slice": 60.0,
    }
    fanin = {
        "sizes": {"10": size},
        "linearity": {"requests_per_slice": 0.82, "wru_per_slice": 0.94, "ms_per_slice": 0.7},
    }
    text = render({**_results(good=True), "fanin": fanin})
    assert "## 7. Fan-in" in text
    assert "| 11 | 29 | 2.64 | 24 | 2.18 | 0.7 | 60.0 |" in text
    assert "requests x0.82, write units x0.94, wall time x0.70" in text


def test_findings_explain_only_missed_targets() -> None:
    assert findings(_results(good=True)) == []
    notes = findings(_results(good=False))
    joined = "\n".join(notes)
    assert joined.count("**") >= 2 * 5
    assert "**SQS.**" in joined and "Sends are 0.75 requests per envelope-hop" in joined  # 30 sends / 40 hops
    assert "**DynamoDB writes.**" in joined
    assert "**Cost.**" in joined and "$9.38" in joined  # 75 / 8
    assert "**Latency and throughput on moto.**" in joined
    assert "**Cold start.**" in joined and "asya 25.0 ms" in joined


@pytest.mark.parametrize(
    ("moto_busy", "mesh_busy", "said"),
    [
        (0.914, 0.35, "busy 91% of the time and the mesh's 35%: moto is the limit"),
        (0.4, 0.95, "busy 40% of the time and the mesh's 95%: the mesh's own process"),
        (0.5, 0.5, "neither process is saturated"),
    ],
)
def test_latency_finding_names_the_busy_process(moto_busy: float, mesh_busy: float, said: str) -> None:
    results = _results(good=False)
    results["latency"]["saturation"].update(moto_cpu_busy=moto_busy, mesh_cpu_busy=mesh_busy)
    (latency,) = [note for note in findings(results) if note.startswith("**Latency")]
    assert said in latency


def test_latency_finding_without_cpu_figures_makes_no_claim_about_them() -> None:
    results = _results(good=False)
    del results["latency"]["saturation"]["moto_cpu_busy"]
    (latency,) = [note for note in findings(results) if note.startswith("**Latency")]
    assert "busy" not in latency and "7.4 tasks/s" in latency


def test_findings_do_not_depend_on_mutation_of_the_results() -> None:
    results = _results(good=False)
    before = copy.deepcopy(results)
    findings(results)
    render(results, notes=findings(results))
    assert results == before


def test_sqs_finding_separates_the_gateways_create_send_from_the_layers_sends() -> None:
    results = _results(good=False)
    traffic = results["traffic"]["b10-hops"]
    traffic["operations"]["sqs:SendMessage"] = _usage(requests=10, billed_requests=10)
    traffic["components"]["gateway"] = {"sqs": _usage(requests=10, billed_requests=10)}
    sqs = next(note for note in findings(results) if note.startswith("**SQS.**"))
    # 30 batches / 40 hops for the layer; the gateway's 10 creates / 40 hops apart; polls (6 - 2 empty) / 40
    assert "Sends are 0.75 requests per envelope-hop" in sqs
    assert "`SendMessage` of each new task 0.25" in sqs
    assert "receives and deletes 0.10" in sqs
    assert "make 0.85 requests per hop" in sqs


def test_wru_finding_ranks_components_by_write_units_per_task() -> None:
    results = _results(good=False)
    traffic = results["traffic"]["b10-hops"]
    traffic["components"] = {
        "gateway": {"dynamodb": _usage(wru_table=60, wru_index=30)},
        "normalize": {"dynamodb": _usage(wru_table=30)},
    }
    wru = next(note for note in findings(results) if note.startswith("**DynamoDB writes.**"))
    assert "(gateway 9.0, normalize 3.0)" in wru
