"""The end-to-end pricing of issue 27 (``bench.endtoend``): pure arithmetic over the watching bench's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cost, endtoend

PRICES = cost.load_prices((Path(__file__).resolve().parents[2] / "bench" / "prices.toml").read_text(encoding="utf-8"))


def _stream(tasks: int, seconds: float, rru: float) -> dict[str, float]:
    return {"tasks": tasks, "stream_seconds": seconds, "read_units": rru, "lag_seconds": 0.0, "read_requests": 1}


def _watching() -> dict[str, object]:
    return {
        "poll_every": 2.0,
        "create": {"wall_ms": 100.0, "read_units": 0.0},
        "view": {"wall_ms": 50.0, "read_units": 2.0},
        "durations": {
            "10": {
                "today": _stream(1, 10.0, 40.0),
                "new_1": _stream(1, 10.0, 10.0),
                "new_many": _stream(50, 10.0, 500.0),
            }
        },
    }


def test_watching_is_duration_times_memory_plus_invocation_plus_reads() -> None:
    today = endtoend.watch_cost(_stream(1, 10.0, 40.0), PRICES, memory_mb=1024)
    # 10 GB-s at $0.0000133334, one $0.20/M invocation, 40 read units at $0.125/M, per million tasks
    assert today == pytest.approx(10 * 0.0000133334 * 1e6 + 0.20 + 40 * 0.125)
    shared = endtoend.watch_cost(_stream(50, 10.0, 500.0), PRICES, memory_mb=128)
    assert shared == pytest.approx((10 / 8 * 0.0000133334 * 1e6 + 0.20 + 500 * 0.125) / 50)


def test_end_to_end_rows_add_ingress_on_both_sides() -> None:
    configs = {
        "b10-hops": {"mesh": {"total": 7.0}, "profile": {"steps": 3}},
        "b1-hops": {"mesh": {"total": 12.0}, "profile": {"steps": 3}},
    }
    out = endtoend.price(_watching(), {"configs": configs}, PRICES)
    row = out["rows"]["10"]
    ingress = 3.50 + 0.1 * 0.0000133334 * 1e6 + 0.20
    assert out["ingress"] == pytest.approx(ingress)
    assert row["unwatched"] == pytest.approx(ingress + 7.0)
    assert row["trickle"] == pytest.approx(ingress + 12.0)
    assert row["sse_new"] == pytest.approx(ingress + 7.0 + 3.50 + row["watch_new"])
    # polled every 2 s for 10 s: 6 GETs, each an API Gateway request, an invocation and a view's reads
    poll = 3.50 + 0.05 * 0.0000133334 * 1e6 + 0.20 + 2 * 0.125
    assert row["polled"] == pytest.approx(row["unwatched"] + 6 * poll)
    # Step Functions pays the same API Gateway request; Standard's DescribeExecution polls are API Gateway requests
    assert row["sfn_standard"] == pytest.approx(3.50 + 3 * 25.0)
    assert row["sfn_standard_watched"] == pytest.approx(row["sfn_standard"] + 6 * 3.50)
    assert row["today_over_new"] == pytest.approx(row["watch_today"] / row["watch_new"])
