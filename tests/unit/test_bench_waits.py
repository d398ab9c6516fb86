"""The bench's price of a durable wait (bench.waits): legs of 900 s, no compute between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import waits
from bench.cost import load_prices

pytestmark = pytest.mark.unit

PRICES_PATH = Path(__file__).resolve().parents[2] / "bench" / "prices.toml"


def test_a_wait_costs_its_legs_and_never_the_time_it_waits() -> None:
    prices = load_prices(PRICES_PATH.read_text(encoding="utf-8"))
    minute, leg, hour, day = (waits.wait_cost(s, prices) for s in (60, 900, 3600, 86_400))
    assert (minute.legs, leg.legs, hour.legs, day.legs) == (1, 1, 4, 96)
    assert minute.mesh_usd == leg.mesh_usd  # one leg, whatever its length
    assert (hour.sqs_requests, hour.lambda_requests, hour.read_units) == (11, 4, 4)
    assert day.mesh_usd == pytest.approx(day.legs / hour.legs * hour.mesh_usd, rel=0.1)  # the last leg is cheaper
    # a function holding the wait pays for the time; past 900 s it cannot hold it at all
    held = leg.held_lambda_usd
    assert held is not None and held > 50 * leg.mesh_usd
    assert hour.held_lambda_usd is None
    assert [row["seconds"] for row in waits.table(prices)["rows"]] == list(waits.WAITS)
    with pytest.raises(ValueError, match="seconds must be >= 1"):
        waits.wait_cost(0, prices)


def test_the_cost_section_renders_the_wait_rows() -> None:
    from bench import report

    prices = load_prices(PRICES_PATH.read_text(encoding="utf-8"))
    lines = report._waits(waits.table(prices))
    assert lines[0].startswith("A sleeping or waiting task holds no compute")
    assert any(line.startswith("| 3,600 s | 4 |") and "not possible (> 900 s)" in line for line in lines)
    assert report._waits(None) == []
