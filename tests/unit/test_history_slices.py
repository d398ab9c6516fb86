"""Replaying one fan-out slice (P-HIST-9): the plan read from the run history. The chosen slice runs again with its
recorded input; each sibling's recorded result goes straight to the aggregator; a sibling that never reached it runs
again; slice 0 is the state the sending hop recorded. What was not recorded whole refuses the replay, saying why."""

from __future__ import annotations

from typing import Any

import pytest

from asya.envelope import Route
from asya.historyslices import SliceReplayError, plan_slice_replay

pytestmark = pytest.mark.unit

AGG = "x-fanin-flow-doc"
STATE = {"items": ["a", "b", "c"]}


def _fan_in(index: int) -> dict[str, Any]:
    return {"origin_id": "t", "slice_index": index, "slice_count": 4, "aggregation_key": "/r", "set": "t/1"}


def _slice(index: int, *, result: Any = None, error: str | None = None, **extra: Any) -> dict[str, Any]:
    child = f"c{index}"
    outputs = [] if result is None else [{"actor": AGG, "envelope_id": child, "payload": result, "cut": False}]
    return {
        "envelope_id": child,
        "parent_id": "t",
        "actor": "summarize",
        "hop": 1,
        "attempt": 1,
        "started_at": f"2026-12-07T20:00:0{index}Z",
        "input": STATE["items"][index - 1],
        "input_cut": False,
        "route": {"prev": ["split"], "curr": "summarize", "next": [AGG]},
        "headers": {"x-asya-fan-in": _fan_in(index), "x-asya-flow-state": {"flow": "doc", "pc": 3, "owner": "t"}},
        "outputs": outputs,
        "error": error,
        **extra,
    }


def _sender() -> dict[str, Any]:
    outputs = [{"actor": "summarize", "envelope_id": f"c{i}", "payload": x} for i, x in enumerate("abc", 1)]
    outputs.append({"actor": AGG, "envelope_id": "t", "payload": STATE, "cut": False})
    return {"envelope_id": "t", "actor": "split", "hop": 0, "started_at": "2026-12-07T20:00:00Z", "outputs": outputs}


def _history(*slices: dict[str, Any], sender: bool = True) -> dict[str, Any]:
    return {"id": "t", "steps": [*([_sender()] if sender else []), *slices]}


def _never() -> bool:
    raise AssertionError("slice 0 was recorded: the program need not be asked")


def test_p_hist_9_the_chosen_slice_runs_again_and_its_siblings_results_are_reused() -> None:
    history = _history(_slice(1, result="A"), _slice(2, error="ValueError: bad"), _slice(3, result="C"))
    plan = plan_slice_replay(history, history["steps"][2], state_is_input=_never)
    assert (plan.aggregator, plan.index, plan.state) == (AGG, 2, STATE)
    assert plan.route == Route(prev=["split"], curr=AGG, next=[])
    assert [(m.index, m.rerun, m.payload) for m in plan.members] == [(1, False, "A"), (2, True, "b"), (3, False, "C")]
    assert plan.members[0].route == Route(prev=["split", "summarize"], curr=AGG, next=[])
    assert plan.members[1].route == Route(prev=["split"], curr="summarize", next=[AGG])


def test_p_hist_9_a_sibling_that_never_reached_the_aggregator_runs_again_too() -> None:
    """Replaying slice 1 of a fan-out whose slice 2 failed: slice 2 had no result to reuse."""
    history = _history(_slice(1, result="A"), _slice(2, error="ValueError: bad"), _slice(3, result="C"))
    plan = plan_slice_replay(history, history["steps"][1], state_is_input=_never)
    assert [(m.index, m.rerun) for m in plan.members] == [(1, True), (2, True), (3, False)]


def test_p_hist_9_what_was_not_recorded_whole_refuses_the_replay() -> None:
    cut = _slice(3, result={"__truncated__": "9000 bytes"})
    cut["outputs"][0]["cut"] = True
    history = _history(_slice(1, result="A"), _slice(2), cut)
    with pytest.raises(SliceReplayError, match=r"^slice 3's result was cut at the flow's history_body_bytes"):
        plan_slice_replay(history, history["steps"][2], state_is_input=_never)
    history = _history(_slice(1, result="A"), _slice(2))  # slice 3 left no line (its object is missing)
    with pytest.raises(SliceReplayError, match=r"^slice 3 of the fan-out left no recorded step"):
        plan_slice_replay(history, history["steps"][2], state_is_input=_never)


def test_p_hist_9_an_offloaded_result_is_reused_by_reference() -> None:
    offloaded = _slice(3, result={"__truncated__": "900000 bytes"})
    offloaded["outputs"][0].update(cut=True, ref="s3://bucket/payloads/c3/2-summarize-x.json")
    history = _history(_slice(1, result="A"), _slice(2), offloaded)
    plan = plan_slice_replay(history, history["steps"][2], state_is_input=_never)
    assert plan.members[2].payload == {"__ref__": "s3://bucket/payloads/c3/2-summarize-x.json"}


def test_p_hist_9_slice_0_unrecorded_is_the_slices_input_for_a_fan_out_of_calls_and_refused_for_a_map() -> None:
    """No hop sent slice 0 (the gateway fanned out at create): a fan-out of calls gave every slice the state itself;
    a map gave them items, so the state is unknown."""
    history = _history(_slice(1, result="A"), _slice(2), _slice(3, result="C"), sender=False)
    plan = plan_slice_replay(history, history["steps"][1], state_is_input=lambda: True)
    assert plan.state == "b"
    with pytest.raises(SliceReplayError, match=r"^the state the map started from was not recorded"):
        plan_slice_replay(history, history["steps"][1], state_is_input=lambda: False)
    computed = plan_slice_replay(
        history, history["steps"][1], state_is_input=lambda: False, state_at_create=lambda: (True, STATE)
    )
    assert computed.state == STATE


def test_p_hist_9_a_slice_of_another_fan_out_is_not_mixed_in() -> None:
    """The same actor fanned out again in a loop (another set): only the chosen slice's set counts."""
    other = _slice(1, result="Z")
    other["envelope_id"] = "d1"
    other["headers"] = {**other["headers"], "x-asya-fan-in": {**_fan_in(1), "set": "t/5"}}
    history = _history(_slice(1, result="A"), _slice(2), _slice(3, result="C"), other)
    plan = plan_slice_replay(history, history["steps"][2], state_is_input=_never)
    assert [m.payload for m in plan.members] == ["A", "b", "C"]


def test_p_hist_9_slice_0_unrecorded_is_the_base_a_fan_out_inside_a_try_carries() -> None:
    history = _history(_slice(1, result="A"), _slice(2), _slice(3, result="C"), sender=False)
    for step in history["steps"]:
        step["headers"]["x-asya-flow-state"] = {**step["headers"]["x-asya-flow-state"], "base": STATE}
    plan = plan_slice_replay(history, history["steps"][1], state_is_input=_never)
    assert plan.state == STATE
