"""Bounded evaluation of flows (P-FLOW-21): an expression's value is bounded by its whole encoded size, nested values
included, and an integer by its magnitude; the total a continuation assigns is bounded too, and so is its time. Each
bound fails the continuation with ``FlowError``, quickly and without building the value."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.flows import FlowError, FlowState, Program, advance, compile_flow

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 27, 10, 0, 0, tzinfo=UTC)


def _program(body: str, *, max_iterations: int = 100) -> Program:
    source = f"@flow(max_iterations={max_iterations})\ndef f(state):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return compile_flow(source, flow="f")


def _run(program: Program, payload: Any) -> Any:
    return advance(program, payload, FlowState(flow="f", pc=0, owner="t"), deadline_at=None, now=NOW).payload


def test_p_flow_21_a_doubled_nested_value_is_refused_by_its_whole_size() -> None:
    """The issue's shape: ``x = [x, x]`` in a loop. Each level is a list of 2, so a top-level length check never
    fires; the encoded size doubles every iteration (here from 1,000 characters to 8 MB in 13 rounds)."""
    program = _program(
        """
        while state["i"] < 13:
            state["i"] += 1
            state["x"] = [state["x"], state["x"]]
        state = a(state)
        """
    )
    with pytest.raises(FlowError, match="bytes"):
        _run(program, {"i": 0, "x": "a" * 1000})


def test_p_flow_21_a_dict_of_shared_values_is_measured_as_sent() -> None:
    program = _program('state["y"] = {"a": state["x"], "b": [state["x"], state["x"], state["x"], state["x"]]}')
    with pytest.raises(FlowError, match="bytes"):
        _run(program, {"x": "b" * 1_500_000})


def test_p_flow_21_an_integer_is_bounded_by_its_magnitude() -> None:
    program = _program(
        """
        while state["i"] < 12:
            state["i"] += 1
            state["n"] = state["n"] * state["n"]
        state = a(state)
        """
    )
    with pytest.raises(FlowError, match="integer"):
        _run(program, {"i": 0, "n": 10})


def test_p_flow_21_a_repeat_is_refused_before_it_is_built() -> None:
    program = _program('state["y"] = [state["x"]] * 3000')
    with pytest.raises(FlowError, match="bytes"):
        _run(program, {"x": "c" * 10_000})


def test_p_flow_21_the_total_a_continuation_assigns_is_bounded() -> None:
    """Each value is under the value bound, but a loop stores it under a new key every round."""
    program = _program(
        """
        while state["i"] < 100:
            state["i"] += 1
            state["k" + str(state["i"])] = state["x"]
        state = a(state)
        """
    )
    with pytest.raises(FlowError, match="assigned"):
        _run(program, {"i": 0, "x": "d" * 1_000_000})


def test_p_flow_21_values_within_the_bounds_still_work() -> None:
    program = _program(
        """
        while state["i"] < 5:
            state["i"] += 1
            state["x"] = [state["x"], state["x"]]
            state["n"] = state["n"] * 1000
        state = a(state)
        """
    )
    out = _run(program, {"i": 0, "x": "e", "n": 7})
    assert out["n"] == 7 * 10**15
    assert len(str(out["x"])) > 32


def test_p_flow_21_a_continuation_runs_under_a_time_budget() -> None:
    """The clock is the test's: every reading is one second later, so the budget is spent within a few
    instructions, however fast the machine."""
    ticks = iter(range(10**9))
    program = _program(
        """
        while True:
            state["i"] += 1
        """,
        max_iterations=10**6,
    )
    with pytest.raises(FlowError, match="time budget"):
        advance(
            program,
            {"i": 0},
            FlowState(flow="f", pc=0, owner="t"),
            deadline_at=None,
            now=NOW,
            monotonic=lambda: float(next(ticks)),
        )


def test_p_flow_21_measuring_stops_at_the_limit_however_large_the_shared_value() -> None:
    """``x = [x, x]`` sixty times shares every level: 2**60 leaves as sent, a few objects in memory. The measure
    stops once the limit is passed (it would never finish otherwise), and counts every occurrence until then."""
    from asya.flows.expr import encoded_size

    x: Any = [1]
    for _ in range(60):
        x = [x, x]
    assert encoded_size(x, 10_000) > 10_000
    assert encoded_size([[1, 2], {"k": "ab"}], 10_000) >= len('[[1,2],{"k":"ab"}]')
