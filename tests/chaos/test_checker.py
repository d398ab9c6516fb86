"""The chaos checker (P-ACK-7, P-STAT-2, P-FAN-3): each property holds on a clean history and reports its violation
on a history built to break it, so a ``make chaos`` pass means something."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.actors import HandlerCall
from chaos.checker import DeadLetter, History, check, runs_across_end, runs_after_lease
from chaos.faults import Invocation
from chaos.workload import Observation, TaskPlan

pytestmark = pytest.mark.chaos

PLAN = TaskPlan("fan", {"x": 3, "parts": 2})
EXPECTED = {"x": 3, "part": 0, "square": 9}
KEY = "succeeded/2026-11-25/0b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10.jsonl"


def _view(status: str = "succeeded", **extra: Any) -> dict[str, Any]:
    return {"id": "t1", "status": status, "checkpoint_key": KEY, "checkpoint_line": 1, **extra}


def _call(*faults: str, envelope: str = "t1", actor: str = "square", attempt: int = 1) -> HandlerCall:
    invocation = Invocation(actor, "url", "m", "r", 1, {"id": envelope}, faults=list(faults))
    return HandlerCall(actor, envelope, "t1", 2, attempt, invocation)


def _history(**changes: Any) -> History:
    base: dict[str, Any] = {
        "tasks": {"t1": PLAN},
        "observations": [
            Observation("t1", "create", "create", "pending", 0.0),
            Observation("t1", "get", "get", "running", 1.0),
            Observation("t1", "get", "get", "succeeded", 2.0),
        ],
        "views": {"t1": _view()},
        "calls": [_call()],
        "checkpoints": {KEY: [{"id": "t1", "payload": EXPECTED}]},
    }
    return History(**{**base, **changes})


def _failing(history: History) -> dict[str, list[str]]:
    return {name: found for name, found in check(history).items() if found}


def test_a_clean_history_passes_every_property() -> None:
    assert _failing(_history()) == {}


def test_terminal_once_reports_a_task_left_running_and_two_terminal_statuses() -> None:
    """P-STAT-2: exactly one terminal status."""
    assert "terminal_once" in _failing(_history(views={"t1": _view("running")}))
    twice = [*_history().observations, Observation("t1", "sse", "sse:t1", "failed", 3.0)]
    assert "terminal_once" in _failing(_history(observations=twice))


def test_monotonic_reports_a_status_going_back_within_one_stream() -> None:
    back = [Observation("t1", "sse", "sse:t1", "running", 0.0), Observation("t1", "sse", "sse:t1", "pending", 1.0)]
    assert _failing(_history(observations=back)) == {"monotonic": ["t1: sse saw 'running' then 'pending'"]}


def test_accounted_reports_leftovers_a_stray_dead_letter_and_a_timed_out_task_with_no_dead_letter() -> None:
    """P-ACK-7: nothing is lost."""
    assert "accounted" in _failing(_history(leftovers={"square": 2}))
    assert "accounted" in _failing(_history(dead_letters=[DeadLetter("square", {"id": "other"})]))
    timed_out = _history(views={"t1": _view("failed", error="task timed out")})
    assert "accounted" in _failing(timed_out)
    explained = _history(
        views={"t1": _view("failed", error="task timed out")}, dead_letters=[DeadLetter("split", {"id": "t1"})]
    )
    assert "accounted" not in _failing(explained)


def test_accounted_takes_a_timeout_as_explained_only_when_a_crash_sent_the_task_envelope_back_near_the_deadline() -> (
    None
):
    """P-TIME-3: crashes in a row (a visibility timeout each) may use up a task's deadline; the late envelope then
    fails the task with ``Timeout``. A timeout with no such redelivery near the deadline is a loss."""

    def timed_out(crash_at: float) -> History:
        crash = Invocation(
            "split", "url", "m", "r", 3, {"id": "t1"}, frozenset({"t1"}), ["crash_before_send"], crash_at
        )
        return _history(
            views={"t1": _view("failed", error="task timed out")},
            observations=[Observation("t1", "create", "create", "pending", 0.0)],
            invocations=[crash],
            visibility_seconds=30.0,
            flow_timeouts={"fan": 120.0},
        )

    assert _failing(timed_out(95.0)) == {}  # back at 125 s: past the deadline
    assert _failing(timed_out(85.0)) == {}  # back at 115 s: 5 s before it, too late to finish the route
    other = _failing(
        _history(
            views={"t1": _view("failed", error="KeyError: 'x'")},
            observations=[Observation("t1", "create", "create", "pending", 0.0)],
            invocations=timed_out(95.0).invocations,
            visibility_seconds=30.0,
            flow_timeouts={"fan": 120.0},
        )
    )
    assert list(other) == ["checkpoint"], other  # a late crash excuses a timeout, never another failure
    early = _failing(timed_out(40.0))  # back at 70 s: 50 s to spare, so the timeout is unexplained
    assert set(early) == {"accounted", "checkpoint"}, early
    assert "lost" in early["accounted"][0]


def test_checkpoint_reports_a_wrong_payload_a_missing_line_and_contradictory_lines() -> None:
    wrong = {KEY: [{"id": "t1", "payload": {"x": 3, "part": 0, "square": 10}}]}
    assert "checkpoint" in _failing(_history(checkpoints=wrong))
    assert "checkpoint" in _failing(_history(checkpoints={}))
    both = {KEY: [{"id": "t1", "payload": EXPECTED}], "failed/2026-11-25/x.jsonl": [{"id": "t1", "payload": {}}]}
    assert "checkpoint" in _failing(_history(checkpoints=both))


def test_checkpoint_reports_a_failure_nothing_explains_and_accepts_exhausted_retries() -> None:
    failed = {"t1": _view("failed", error="ChaosError")}
    assert "checkpoint" in _failing(_history(views=failed))
    exhausted = [_call("handler_error", actor="split", attempt=attempt) for attempt in (1, 2, 3)]
    assert "checkpoint" not in _failing(_history(views=failed, calls=exhausted))


def test_duplicates_are_explained_only_by_a_run_that_could_not_ack() -> None:
    """P-ACK-7: a second run of one hop needs a crash or a failed record before it."""
    assert "duplicates" in _failing(_history(calls=[_call(), _call()]))
    assert "duplicates" in _failing(_history(calls=[_call("duplicate", "lease_expiry"), _call()]))
    assert "duplicates" not in _failing(_history(calls=[_call("crash_after_send"), _call()]))
    assert "duplicates" not in _failing(_history(calls=[_call("dynamodb_throttle"), _call()]))


def test_children_reports_a_task_item_write_by_a_child() -> None:
    """P-FAN-3: children never write a task status."""
    writes = [{"actor": "square", "task": "t1", "operation": "UpdateItem"}]
    assert _failing(_history(child_task_writes=writes)) == {"children": ["square wrote task t1 (UpdateItem)"]}


def test_a_repeated_run_one_lease_later_is_explained_and_counted() -> None:
    """P-ACK-7: "a duplicate arrives after the lease ended and before the next hop claimed"."""
    first, again = _call(), _call()
    late = HandlerCall(again.actor, again.envelope_id, again.task_id, again.hop, again.attempt, again.invocation, 30.0)
    assert "duplicates" not in _failing(_history(calls=[first, late], lease_seconds=25.0))
    assert runs_after_lease([first, late], 25.0) == 1
    early = HandlerCall(again.actor, again.envelope_id, again.task_id, again.hop, again.attempt, again.invocation, 5.0)
    assert "duplicates" in _failing(_history(calls=[first, early], lease_seconds=25.0))


def test_followed_reports_a_followed_task_whose_stream_never_delivered_the_terminal_status() -> None:
    """GW-SSE-5, GW-SSE-7: a follower that resumed across gateway restarts still gets the end of its task."""
    followed = TaskPlan("fan", PLAN.payload, follow=True)
    assert _failing(_history(tasks={"t1": followed})) == {
        "followed": ["t1: its SSE follower never saw a terminal status"]
    }
    seen = [*_history().observations, Observation("t1", "sse", "sse:t1", "succeeded", 2.5)]
    assert _failing(_history(tasks={"t1": followed}, observations=seen)) == {}


def test_after_end_reports_a_handler_run_for_a_copy_received_after_its_task_ended() -> None:
    """P-ACK-7, P-STAT-10 (R3): a copy arriving after the task ended is acked without a handler call; a record
    received before the end whose handler ran after it is the documented window, counted apart."""
    first = Invocation("square", "url", "m", "r", 1, {"id": "c1", "parent_id": "t1"}, received=1.0)
    original = HandlerCall("square", "c1", "t1", 2, 1, first, started=1.1)
    late = Invocation("square", "url", "m", "r", 1, {"id": "c1", "parent_id": "t1"}, received=2.5)
    copy = HandlerCall("square", "c1", "t1", 2, 1, late, started=2.6)
    assert _failing(_history(calls=[_call(), original, copy], lease_seconds=1.0)) == {
        "after_end": ["square ran c1 (task t1) hop (2, 1) again, received 0.50 s after the task ended"]
    }
    # a child's first run of a hop after its task ended is no copy (P-FAN-6)
    assert _failing(_history(calls=[_call(), copy])) == {}
    early = Invocation("square", "url", "m", "r", 1, {"id": "c1", "parent_id": "t1"}, received=1.5)
    across = HandlerCall("square", "c1", "t1", 2, 1, early, started=2.1)
    history = _history(calls=[_call(), across])
    assert _failing(history) == {}
    assert runs_across_end(history) == 1


def test_forged_reports_an_accepted_forged_post_and_a_crew_set_not_refused() -> None:
    """GW-EVT-1/3 (R3), P-ABI-15 (R3)."""
    assert _failing(_history(crew_sets=[("t1", "x-sink", True)])) == {}
    assert _failing(_history(crew_sets=[("t1", "x-sink", False)], forged_accepted=["t1 paused client 204"])) == {
        "forged": ["forged post accepted: t1 paused client 204", "x-sink SET into the route of t1 was not refused"]
    }


def test_forged_reports_a_layer_header_set_not_refused() -> None:
    """P-HDR-5: a handler's SET of a layer header is refused at its yield."""
    assert _failing(_history(layer_sets=[("t1", "x-asya-flow-state", True)])) == {}
    assert _failing(_history(layer_sets=[("t1", "x-asya-hops", False)])) == {
        "forged": ["x-asya-hops SET by the handler of t1 was not refused"]
    }


CALC = TaskPlan("calc", {"n": 1})


def _flow_call(actor: str, hop: int, *faults: str, attempt: int = 1) -> HandlerCall:
    invocation = Invocation(actor, "url", "m", "r", 1, {"id": "c1"}, faults=list(faults))
    return HandlerCall(actor, "c1", "c1", hop, attempt, invocation)


def _flow_history(calls: list[HandlerCall], view: dict[str, Any]) -> History:
    return _history(
        tasks={"c1": CALC},
        observations=[Observation("c1", "get", "get", view["status"], 1.0)],
        views={"c1": {"id": "c1", **view}},
        calls=calls,
        checkpoints={KEY: [{"id": "c1", "payload": CALC.expected}]},
    )


def test_flows_hold_when_a_flow_task_repeats_its_plain_run() -> None:
    """``calc`` from ``{"n": 1}``: inc (2), even: double (4), the loop: inc (5), inc (6), done."""
    from chaos.flowplain import plain_run

    actors, result = plain_run({"n": 1})
    assert actors == ["inc", "double", "inc", "inc"]
    assert result == {"n": 6, "done": True}
    assert CALC.expected == result
    calls = [_flow_call(actor, hop) for hop, actor in enumerate(actors, start=1)]
    calls.append(_flow_call("double", 2, attempt=2))  # a retried hop is still one call of the sequence
    view = {"status": "succeeded", "result": result, "checkpoint_key": KEY, "checkpoint_line": 1}
    assert _failing(_flow_history(calls, view)) == {}


def test_flows_report_another_call_sequence_or_result_than_the_plain_run() -> None:
    calls = [_flow_call("inc", 1), _flow_call("inc", 2)]
    view = {"status": "succeeded", "result": {"n": 6, "done": True}, "checkpoint_key": KEY, "checkpoint_line": 1}
    assert _failing(_flow_history(calls, view))["flows"] == [
        "c1: called ['inc', 'inc'], the plain run calls ['inc', 'double', 'inc', 'inc']"
    ]
    calls = [_flow_call(actor, hop) for hop, actor in enumerate(["inc", "double", "inc", "inc"], start=1)]
    view = {**view, "result": {"n": 7}}
    assert _failing(_flow_history(calls, view))["flows"] == [
        "c1: succeeded with {'n': 7}, the plain run returns {'n': 6, 'done': True}"
    ]


def test_flows_take_a_second_payload_as_the_failure_of_its_own_hop_only() -> None:
    """P-FLOW-11: the task fails at the hop that returned two payloads, and nothing runs after it."""
    failed = {"status": "failed", "error": "FlowError: actor 'double' returned more than one payload in flow 'calc'"}
    calls = [_flow_call("inc", 1), _flow_call("double", 2, "second_payload")]
    assert _failing(_flow_history(calls, failed)) == {}
    calls.append(_flow_call("inc", 3))
    assert _failing(_flow_history(calls, failed))["flows"] == [
        "c1: inc ran at hop 3, after double returned two payloads at hop 2"
    ]
    retried = [_flow_call("inc", 1), _flow_call("double", 2, "second_payload"), _flow_call("double", 2, attempt=2)]
    retried.append(_flow_call("inc", 3, "handler_error"))  # the retry went on; a later hop failed for its own reason
    assert _failing(_flow_history([*retried, _flow_call("inc", 3, "handler_error", attempt=3)], failed)) == {}
    leaked = HandlerCall("inc", "c1-child", "c1", 3, 1, Invocation("inc", "url", "m", "r", 1, {"id": "c1-child"}))
    assert _failing(_flow_history([*calls[:2], leaked], failed))["flows"] == [
        "c1: inc ran c1-child, a second payload, at hop 3"
    ]
    assert _failing(_flow_history([_flow_call("inc", 1)], {"status": "failed", "error": "boom"}))["flows"] == [
        "c1: failed with nothing injected to explain it: 'boom'"
    ]
