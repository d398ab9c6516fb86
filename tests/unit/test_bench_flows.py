"""The flow cost row of the benchmark report (bench/report.py, issue 29): both configurations side by side."""

from __future__ import annotations

import pytest

from bench.report import render

pytestmark = pytest.mark.unit


def test_the_flow_row_compares_continuations_with_upstream_routers() -> None:
    flows = {
        "hops": 11,
        "invocations": 7,
        "wru": 22,
        "control_nodes_run": 11,
        "upstream": {"hops": 22, "invocations": 18, "wru": 33.0},
    }
    text = render({"flows": flows})
    assert "## 11. Flows written as Python" in text
    assert "| compiled continuations | 11 | 7 | 22 |" in text
    assert "| upstream-style routers | 22 | 18 | 33 |" in text
    assert "Control nodes run inside the layer: 11; extra hops for them: 0." in text


def test_the_flow_row_says_when_it_was_not_measured() -> None:
    assert "## 11. Flows written as Python\n\nNot measured." in render({})


def test_the_parallel_map_row_reports_the_wall_times() -> None:
    flows = {
        "hops": 11,
        "invocations": 7,
        "wru": 22,
        "control_nodes_run": 11,
        "upstream": {"hops": 22, "invocations": 18, "wru": 33.0},
        "parallel_map": {
            "slices": 10,
            "slice_seconds": 0.5,
            "batch_size": 10,
            "in_turn_seconds": 5.0,
            "wall_seconds": 0.61,
            "bounded_5_wall_seconds": 1.12,
            "task_seconds": 2.5,
        },
    }
    text = render({"flows": flows})
    assert "A map of 10 slices of a 0.5 s handler whose `batch_size` is 10" in text
    assert "| at the same time | 0.61 |" in text
    assert "| bounded, `max_concurrency=5` (P-MAP-2) | 1.12 |" in text
