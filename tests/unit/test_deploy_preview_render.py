"""The deploy preview's text and its refusal (asya_local.preview), from live states built by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from asya_local.livestate import FlowInFlight, KeptProgram, LiveState, QueueDepth, QueueSetting, RemovedActor
from asya_local.preview import Drained, drained_lines, refusal, render_live

T1 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=2)
OLD, NEW, OLDER = "a" * 64, "b" * 64, "c" * 64


def _removed(name: str, queue: int = 0, dlq: int | None = 0) -> RemovedActor:
    return RemovedActor(
        name,
        QueueDepth(f"https://q/{name}", visible=queue),
        None if dlq is None else QueueDepth(f"https://q/{name}-dlq", visible=dlq),
    )


def test_an_empty_state_says_nothing_is_affected() -> None:
    assert render_live(LiveState("demo")) == [
        "deployed mesh 'demo' (live; counts are approximate):",
        "  no actor removed, no task in flight on another program, no queue setting changed",
    ]
    assert refusal(LiveState("demo")) is None


def test_removed_actors_show_each_queue_count() -> None:
    busy = RemovedActor("busy", QueueDepth("q", visible=2, in_flight=1, delayed=1), QueueDepth("d", visible=1))
    state = LiveState("demo", removed=(busy, _removed("idle"), _removed("bare", dlq=None)))
    lines = render_live(state)
    assert lines[1] == "actors removed (their queue and DLQ are deleted with the messages in them):"
    assert lines[2] == (
        "  - busy: queue 4 messages (2 waiting, 1 in flight, 1 delayed), DLQ 1 message (1 waiting, 0 in flight, "
        "0 delayed)"
    )
    assert lines[3] == "  - idle: queue empty, DLQ empty"
    assert lines[4] == "  - bare: queue empty, no DLQ"


def test_only_a_removed_actor_holding_messages_is_refused_and_the_drain_is_named() -> None:
    state = LiveState("demo", removed=(_removed("idle"), _removed("waiting", queue=3), _removed("dead", dlq=2)))
    assert [a.name for a in state.blocking] == ["waiting", "dead"]
    problem = refusal(state)
    assert problem is not None
    assert "waiting (3), dead (2)" in problem and "idle" not in problem
    assert "asya dlq redrive dead" in problem and "asya dlq redrive waiting" not in problem
    assert "Draining an actor before removing it" in problem and "`asya deploy --force`" in problem


def test_a_changed_flow_names_both_programs_and_its_tasks() -> None:
    flow = FlowInFlight(
        "triage",
        NEW,
        True,
        kept=(KeptProgram(OLDER, T1, paused=1), KeptProgram(OLD, T2, paused=4), KeptProgram("d" * 64, None, 1)),
        paused_unversioned=2,
        running=7,
    )
    assert flow.deployed_digest == OLD and flow.changed and flow.paused == 8
    lines = render_live(LiveState("demo", flows=(flow,), running_window=timedelta(seconds=600), read_bound=50))
    assert lines[1] == (
        "flows with work in flight (paused: the paused/ listing; running: tasks created in the last 600 s, the "
        "by_created index; at most 50 reads each):"
    )
    assert lines[2] == (
        f"  ~ triage: program {OLD[:12]} -> {NEW[:12]}; 7 running (any program), 8 paused (tasks in flight finish on "
        "their program, new tasks take the new one)"
    )
    assert lines[3] == "      2 paused without a digest (they resume on the current program)"
    assert lines[4] == f"      program {OLDER[:12]} (first used 2026-03-01T10:00:00Z): 1 paused"
    assert lines[6] == f"      program {'d' * 12} (NOT KEPT: they fail when resumed): 1 paused"


def test_a_flow_whose_program_was_used_after_the_older_one_is_unchanged() -> None:
    flow = FlowInFlight("triage", NEW, True, kept=(KeptProgram(OLD, T1, 1),), paused_on_new=1, new_stored_at=T2)
    assert flow.deployed_digest == NEW and not flow.changed
    lines = render_live(LiveState("demo", flows=(flow,)))
    assert lines[2] == f"  = triage: program {NEW[:12]} unchanged; 0 running (any program), 2 paused"
    assert lines[3] == "      1 paused on the new program"


def test_a_removed_flow_and_a_static_route() -> None:
    gone = FlowInFlight("old", None, False, kept=(KeptProgram(OLD, T1, 2),))
    route = FlowInFlight("pipeline", None, True, running=3)
    assert gone.changed and not route.changed
    lines = render_live(LiveState("demo", flows=(gone, route)))
    assert lines[2].startswith("  - old: removed; 0 running (any program), 2 paused (they finish on their program")
    assert lines[4] == "  = pipeline: a static route; 3 running (any program), 0 paused"


def test_settings_and_a_cut_count_are_labelled() -> None:
    setting = QueueSetting("analyze", "max_receive_count", 5, 3, "deliveries before a message moves to the DLQ")
    lines = render_live(LiveState("demo", settings=(setting,), cut=("paused",), read_bound=10))
    assert lines[1:] == [
        "settings (as the deployed queues show them):",
        "  actors.analyze.max_receive_count: 5 -> 3  (deliveries before a message moves to the DLQ)",
        "  (a read bound of 10 cut the paused counts: more exist)",
    ]


def test_what_force_drained() -> None:
    assert drained_lines([Drained("gone", 2, 1, 0), Drained("busy", 0, 0, 3)]) == [
        "--force: gone: 2 from its queue and 1 from its DLQ failed through x-sump",
        "--force: busy: 0 from its queue and 0 from its DLQ failed through x-sump; 3 in flight left (being processed)",
    ]
