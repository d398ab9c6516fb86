"""STEP of ``asya retry ID --from STEP`` (R3, P-HIST-6): parsing with clear errors, and choosing the recorded step."""

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
    ],
)
def test_p_hist_6_a_step_is_a_hop_index_or_an_actor_with_its_run(text: str, ref: StepRef) -> None:
    assert parse_step(text) == ref
    assert str(parse_step(text)) == text.strip()


@pytest.mark.parametrize("text", ["", "-1", "#2", "review#", "review#x", "re view", "1.5", "review#2#3"])
def test_p_hist_6_a_bad_step_names_the_value_and_the_forms(text: str) -> None:
    with pytest.raises(StepError, match=r"is not a step: give a hop index \(e\.g\. 2\) or an actor name") as info:
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
    with pytest.raises(StepError, match=r"actor 'publish' ran no step of task t \(actors: draft, review\)$"):
        select_step(HISTORY, parse_step("publish"))
    with pytest.raises(StepError, match=r"'review' ran 2 time\(s\) in task t, not 3$"):
        select_step(HISTORY, parse_step("review#3"))
    with pytest.raises(StepError, match=r"task u has no recorded step: is its flow's history on"):
        select_step({"id": "u", "steps": []}, parse_step("0"))


def test_p_hist_6_an_actor_that_ran_only_in_fan_out_slices_is_refused_naming_the_hop_that_sent_them() -> None:
    """A slice is not a starting point (its aggregator waits for its siblings): the refusal says so and names the
    task's hop that sent the slices, the replay that reruns them all."""
    sender = {**_step(2, "draft"), "outputs": [{"actor": "echo", "envelope_id": "child"}]}
    history = {**HISTORY, "steps": [sender if s["hop"] == 2 and s["actor"] == "draft" else s for s in HISTORY["steps"]]}
    with pytest.raises(
        StepError,
        match=r"^--from echo#1: 'echo' ran only in fan-out slices of task t \(1 run\(s\)\): a slice is not a starting "
        r"point; retry from the hop that sent them \(2\)$",
    ):
        select_step(history, parse_step("echo#1"))
    with pytest.raises(StepError, match=r"ran only in fan-out slices of task t \(1 run\(s\)\): a slice is not a "
                       r"starting point; retry from the step that fanned out$"):  # fmt: skip
        select_step(HISTORY, parse_step("echo"))
