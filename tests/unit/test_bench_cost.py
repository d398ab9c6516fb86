"""The cost model of ``make bench`` (``bench/cost.py``) and its price table (``bench/prices.toml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import cancelreads, cost
from bench.__main__ import price_cancel_reads
from bench.report import render

pytestmark = pytest.mark.unit

PRICES_TOML = Path(__file__).resolve().parents[2] / "bench" / "prices.toml"


@pytest.fixture(scope="module")
def prices() -> cost.PriceTable:
    return cost.load_prices(PRICES_TOML.read_text(encoding="utf-8"))


def test_every_price_names_its_region_date_and_source(prices: cost.PriceTable) -> None:
    assert set(prices.prices) >= {"sqs_request", "dynamodb_write_request_unit", "sfn_standard_transition"}
    for price in prices.prices.values():
        assert price.region == "us-east-1"
        assert len(price.date) == 10 and price.date[4] == "-"
        assert price.source.startswith("https://aws.amazon.com/")
        assert price.each > 0
    assert prices.each("sqs_request") == pytest.approx(0.40 / 1_000_000)
    assert prices.sfn_step_seconds == (0.1, 1.0, 10.0)


def test_a_missing_field_is_named(prices: cost.PriceTable) -> None:
    text = PRICES_TOML.read_text(encoding="utf-8").replace('source = "https://aws.amazon.com/sqs/pricing/"\n', "")
    with pytest.raises(cost.PriceError, match=r"prices\.sqs_request\.source: missing"):
        cost.load_prices(text)
    with pytest.raises(cost.PriceError, match=r"prices\.sqs_request\.price must be a non-negative number"):
        cost.load_prices(PRICES_TOML.read_text(encoding="utf-8").replace("price = 0.40", 'price = "cheap"'))
    with pytest.raises(cost.PriceError, match="not valid TOML"):
        cost.load_prices("[prices")


def _profile(**overrides: float) -> cost.TaskProfile:
    values = {
        "steps": 3,
        "sqs_billed_requests": 5.0,
        "dynamodb_wru": 10.0,
        "dynamodb_rru": 2.0,
        "s3_tier1": 1.0,
        "s3_tier2": 0.0,
        "lambda_invocations": 0.4,
        "lambda_gb_seconds": 0.01,
    }
    values.update(overrides)
    return cost.TaskProfile(**values)  # type: ignore[arg-type]


def test_mesh_cost_per_million_tasks_by_line_item(prices: cost.PriceTable) -> None:
    mesh = cost.mesh_cost(_profile(), prices)
    assert mesh["sqs_requests"] == pytest.approx(5 * 0.40)
    assert mesh["dynamodb_writes"] == pytest.approx(10 * 0.625)
    assert mesh["dynamodb_reads"] == pytest.approx(2 * 0.125)
    assert mesh["s3_requests"] == pytest.approx(5.0)  # $0.005 per 1,000 PUTs
    assert mesh["lambda_requests"] == pytest.approx(0.4 * 0.20)
    assert mesh["lambda_duration"] == pytest.approx(0.01 * 0.0000133334 * 1_000_000)
    assert mesh["total"] == pytest.approx(sum(v for k, v in mesh.items() if k != "total"))


def test_step_functions_standard_bills_one_transition_per_step(prices: cost.PriceTable) -> None:
    assert cost.sfn_standard_cost(3, prices) == pytest.approx(75.0)


def test_step_functions_express_bills_requests_and_rounded_duration_at_64_mb(prices: cost.PriceTable) -> None:
    # 3 steps of 1 s: 3 s at 64 MB = 0.1875 GB-s per execution
    assert cost.sfn_express_cost(3, 1.0, prices) == pytest.approx(1.0 + 0.1875 * 0.00001667 * 1_000_000)
    # 3 steps of 0.1 s = 0.3 s exactly (no float creep to 0.4 s)
    assert cost.sfn_express_cost(3, 0.1, prices) == pytest.approx(1.0 + 0.3 * 0.0625 * 0.00001667 * 1_000_000)
    # 3 steps of 0.12 s = 0.36 s, billed as 0.4 s
    assert cost.sfn_express_cost(3, 0.12, prices) == pytest.approx(1.0 + 0.4 * 0.0625 * 0.00001667 * 1_000_000)


def test_orchestration_duration_counts_waits_and_cpu_at_the_vcpu_share() -> None:
    seconds = cost.orchestration_gb_seconds(
        calls={"analyze": {"dynamodb": 3.0, "sqs": 1.0}},
        envelopes={"analyze": 1.0},
        memory_mb={"analyze": 1769},
        layer_cpu_ms=2.0,
        call_ms={"dynamodb": 5.0, "sqs": 10.0},
    )
    # (3 * 5 + 10 + 2 ms of CPU at a full vCPU) = 27 ms at 1769 MB
    assert seconds == pytest.approx(0.027 * 1769 / 1024)
    slow = cost.orchestration_gb_seconds(
        calls={}, envelopes={"a": 1.0}, memory_mb={"a": 256}, layer_cpu_ms=1.0, call_ms={}
    )
    assert slow == pytest.approx(1769 / 256 / 1000 * 256 / 1024)  # a 256 MB function runs the CPU part ~7x longer


def test_task_profile_from_a_metered_configuration() -> None:
    traffic = {
        "steps": 3,
        "services": {
            "sqs": {"per_task": {"billed_requests": 4.8}},
            "dynamodb": {"per_task": {"wru": 40.0, "rru": 6.0}},
            "s3": {"per_task": {"s3_tier1": 1.0, "s3_tier2": 0.0}},
        },
        "lambda_invocations_per_task": 0.4,
        "function_calls_per_task": {"normalize": {"dynamodb": 3.0}},
        "envelopes_per_task": {"normalize": 1.0},
        "memory_mb": {"normalize": 1024, "gateway": 512},
    }
    profile = cost.task_profile(traffic, layer_cpu_ms=0.0, call_ms={"dynamodb": 10.0})
    assert (profile.sqs_billed_requests, profile.dynamodb_wru, profile.dynamodb_rru) == (4.8, 40.0, 6.0)
    assert profile.lambda_gb_seconds == pytest.approx(0.030)  # 30 ms at 1 GB; the gateway made no counted calls


def test_compare_gives_the_ratios_the_goals_are_stated_in(prices: cost.PriceTable) -> None:
    result = cost.compare(_profile(), prices)
    total = result["mesh"]["total"]
    assert result["standard_over_mesh"] == pytest.approx(75.0 / total)
    assert set(result["mesh_over_express"]) == {"0.1s", "1s", "10s"}
    assert result["mesh_over_express"]["1s"] == pytest.approx(total / result["sfn_express"]["1s"])


def test_p_cancel_5_cancel_reads_are_priced_at_half_a_read_unit_each(prices: cost.PriceTable) -> None:
    """P-CANCEL-5 (R3): a 60 s generator hop makes 12 eventually consistent reads of 0.5 unit: $0.75 per million
    hops at $0.125 per million read units; no reads cost nothing."""
    row = cancelreads.price(12, prices)
    assert row["rru"] == pytest.approx(6.0)
    assert row["usd_per_million"] == pytest.approx(0.75)
    assert cancelreads.price(1, prices)["usd_per_million"] == pytest.approx(0.0625)
    assert cancelreads.price(0, prices)["usd_per_million"] == 0


def test_p_cancel_5_the_report_prices_each_hop_duration(prices: cost.PriceTable) -> None:
    section: dict[str, Any] = {"yield_seconds": 0.5, "hops": {"1": {"reads": 0}, "60": {"reads": 12}}}
    price_cancel_reads(section, PRICES_TOML.read_text(encoding="utf-8"))
    text = render({"cancelreads": section})
    assert "| generator hop | cancel reads | read units | USD per million such hops |" in text
    assert "| 60 s | 12 | 6.0 | $0.75 |" in text
    assert "| 1 s | 0 | 0.0 | $0.00 |" in text
