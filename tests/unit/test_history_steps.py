"""STEP of ``asya retry ID --from STEP`` (P-HIST-6): parsing with clear errors, and choosing the recorded step."""

from __future__ import annotations

from typing import Any

import pytest

from asya.historyread import StepError, StepRef, parse_step, select_step

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("0", StepRef(hop=0)),
        (" 12 ", StepRef(hop=12)),
        ("review", StepRef(actor="review")),
        ("review#2", StepRef(actor="review", nth=2)),
        ("x-fanin-merge#1", StepRef(actor="x-fanin-merge", nth=1)),
        ("0b7f6a51-4c1e-5d2a-8e3b-9f4a2c6d1e70", StepRef(envelope="0b7f6a51-4c1e-5d2a-8e3b-9f4a2c6d1e70")),
    ],
)
def test_p_hist_6_a_step_is_a_hop_index_or_an_actor_with_its_run(text: str, ref: StepRef) -> None:
    assert parse_step(text) == ref
    assert str(parse_step(text)) == text.strip()


@pytest.mark.parametrize("text", ["", "-1", "#2", "review#", "review#x", "re view", "1.5", "review#2#3"])
def test_p_hist_6_a_bad_step_names_the_value_and_the_forms(text: str) -> None:
    with pytest.raises(
        StepError, match=r"is not a step: give a hop index \(e\.g\. 2\) or an actor name.*or a child's id$"
    ) as info:
        parse_step(text)
    assert repr(text) in str(info.value)


def test_p_hist_6_runs_are_counted_from_one() -> None:
    with pytest.raises(StepError, match=r"^--from: 'review#0': runs are counted from 1 \(e\.g\. review#1\)$"):
        parse_step("review#0")


def _step(hop: int, actor: str, *, attempt: int = 1, envelope: str = "t") -> dict[str, Any]:
    return {"hop": hop, "actor": actor, "attempt": attempt, "envelope_id": envelope, "input": {"hop": hop}}


HISTORY: dict[str, Any] = {
    "id": "t",
    "steps": [
        _step(0, "draft"),
        _step(1, "review"),
        _step(1, "review", attempt=2),
        _step(2, "draft"),
        _step(2, "echo", envelope="child"),
        _step(3, "review"),
    ],
}


def test_p_hist_6_a_hop_index_names_its_first_attempt() -> None:
    chosen = select_step(HISTORY, StepRef(hop=1))
    assert (chosen["actor"], chosen["attempt"]) == ("review", 1)


def test_p_hist_6_actor_n_is_the_actors_nth_hop_of_the_tasks_own_envelope() -> None:
    assert select_step(HISTORY, parse_step("review#2"))["hop"] == 3
    assert select_step(HISTORY, parse_step("draft#1"))["hop"] == 0


def test_p_hist_6_unknown_ambiguous_or_missing_steps_are_refused_with_the_choices() -> None:
    with pytest.raises(StepError, match=r"'review' ran 2 times in task t: say which \(review#1, review#2\)$"):
        select_step(HISTORY, parse_step("review"))
    with pytest.raises(StepError, match=r"has no recorded hop 7 \(hops: 0, 1, 2, 3\)$"):
        select_step(HISTORY, parse_step("7"))
    with pytest.raises(StepError, match=r"actor 'publish' ran no step of task t \(actors: draft, echo, review\)$"):
        select_step(HISTORY, parse_step("publish"))
    with pytest.raises(StepError, match=r"'review' ran 2 time\(s\) in task t, not 3$"):
        select_step(HISTORY, parse_step("review#3"))
    with pytest.raises(StepError, match=r"task u has no recorded step: is its flow's history on"):
        select_step({"id": "u", "steps": []}, parse_step("0"))


def _slice(hop: int, actor: str, index: int, envelope: str, *, started: str = "") -> dict[str, Any]:
    fan_in = {"origin_id": "t", "slice_index": index, "slice_count": 4, "aggregation_key": "/r", "set": "t/2"}
    return {
        **_step(hop, actor, envelope=envelope),
        "parent_id": "t",
        "headers": {"x-asya-fan-in": fan_in},
        "started_at": started,
    }


def test_p_hist_6_actor_n_counts_fan_out_slices_in_slice_order_between_the_tasks_own_hops() -> None:
    """A map's slices are runs of their actor: ``summarize-chunk#2`` is the second slice, whatever order they
    started in; the task's own hops before and after the fan-out keep their place."""
    ids = [f"{d * 8}-{d * 4}-5{d * 3}-8{d * 3}-{d * 12}" for d in "123"]
    history = {
        "id": "t",
        "steps": [
            _step(0, "split"),
            _slice(1, "summarize-chunk", 3, ids[2], started="a"),
            _slice(1, "summarize-chunk", 1, ids[0], started="b"),
            _slice(1, "summarize-chunk", 2, ids[1], started="c"),
            _step(2, "summarize-chunk"),
        ],
    }
    assert [select_step(history, parse_step(f"summarize-chunk#{n}"))["envelope_id"] for n in (1, 2, 3, 4)] == [
        *ids,
        "t",
    ]
    with pytest.raises(StepError, match=r"ran 4 times in task t: say which \(summarize-chunk#1, .*#4\)$"):
        select_step(history, parse_step("summarize-chunk"))
    assert select_step(history, parse_step(ids[1].upper()))["envelope_id"] == ids[1]
    with pytest.raises(StepError, match=r"has no recorded step of a child 44444444-.* \(children: 1111"):
        select_step(history, parse_step("44444444-4444-5444-8444-444444444444"))
    with pytest.raises(StepError, match=r"actor 'publish' ran no step of task t \(actors: split, summarize-chunk\)$"):
        select_step(history, parse_step("publish"))
