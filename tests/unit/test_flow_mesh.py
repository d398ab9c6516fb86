"""Continuations applied to envelopes (asya.flows.mesh): the statements the equivalence test cannot see, with their
ids. P-FLOW-3, P-FLOW-8, P-FLOW-9, P-FLOW-11, P-FLOW-12, P-FLOW-13."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import STATE_HEADER, FlowState, Program, compile_flow, continue_outgoing, on_failure, start

pytestmark = pytest.mark.unit

NOW = "2026-11-27T10:00:00Z"


def _program(body: str, *, header: str = "def f(state):\n") -> Program:
    return compile_flow(header + textwrap.indent(textwrap.dedent(body), "    "), flow="f")


def _end_of(
    program: Program,
    env_id: str,
    state: FlowState,
    payload: Any,
    *,
    prev: list[str] | None = None,
    deadline_at: str | None = None,
) -> routing.Outgoing:
    """A frame that ends its route at the actor ``a`` of a flow (P-ROUTE-4) with the given flow state."""
    env = Envelope(
        id=env_id,
        route=Route(prev=prev or ["a"], curr="", next=[]),
        payload=payload,
        headers={STATE_HEADER: state.to_header()},
        status=Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor="a",
            created_at=NOW,
            deadline_at=deadline_at,
        ),
    )
    return routing.Outgoing(actor=naming.SINK, envelope=env)


def test_p_flow_3_an_envelope_without_flow_state_passes_unchanged() -> None:
    program = _program("state = a(state)")
    out = _end_of(program, "t", FlowState(flow="f", pc=1, owner="t"), {"x": 1})
    del out.envelope.headers[STATE_HEADER]
    assert continue_outgoing({"f": program}, out, now=NOW) == [out]


def test_p_flow_3_a_run_of_calls_is_one_route_segment() -> None:
    program = _program("state = a(state)\nstate['n'] = 1\nstate = b(state)\nstate = c(state)")
    [out] = continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {}), now=NOW)
    assert out.actor == "b"
    assert out.envelope.route.curr == "b" and out.envelope.route.next == ["c"]
    assert out.envelope.payload == {"n": 1}
    assert out.envelope.status is not None and out.envelope.status.phase == "pending"


def test_p_flow_11_a_second_frame_of_a_flow_call_fails_the_task() -> None:
    program = _program("state = a(state)\nstate = b(state)")
    [out] = continue_outgoing({"f": program}, _end_of(program, "child-1", FlowState("f", pc=1, owner="t"), {}), now=NOW)
    assert out.actor == naming.SINK and out.envelope.id == "t"
    status = out.envelope.status
    assert status is not None and status.phase == "failed" and status.reason == "RuntimeError"
    assert status.error is not None and status.error["type"] == "asya.flows.errors.FlowError"
    assert "actor 'a' returned more than one payload in flow 'f'" in status.error["message"]


def test_p_flow_13_the_loop_guard_fails_the_task_naming_the_loop() -> None:
    program = _program(
        "state = a(state)\nwhile True:\n    state['n'] += 1", header="@flow(max_iterations=4)\ndef f(state):\n"
    )
    [out] = continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {"n": 0}), now=NOW)
    error = out.envelope.status.error if out.envelope.status else None
    assert error is not None and error["message"] == "loop at line 4 exceeded max_iterations=4"


def test_p_flow_13_an_expression_error_fails_the_task() -> None:
    program = _program("state = a(state)\nif state['missing'] > 1:\n    state = b(state)")
    [out] = continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {}), now=NOW)
    error = out.envelope.status.error if out.envelope.status else None
    assert error is not None and error["message"] == "expression at line 3 failed: KeyError: 'missing'"


def test_p_flow_12_a_timeout_block_sets_and_restores_the_deadline() -> None:
    program = _program("state = a(state)\nwith timeout(30):\n    state = b(state)\nstate = c(state)")
    outer = "2026-11-27T11:00:00Z"
    [inside] = continue_outgoing(
        {"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {}, deadline_at=outer), now=NOW
    )
    assert inside.envelope.route.curr == "b"
    assert inside.envelope.status is not None and inside.envelope.status.deadline_at == "2026-11-27T10:00:30Z"
    after_b = FlowState.from_header(inside.envelope.headers[STATE_HEADER])
    [outside] = continue_outgoing(
        {"f": program},
        _end_of(program, "t", after_b, {}, prev=["a", "b"], deadline_at="2026-11-27T10:00:30Z"),
        now=NOW,
    )
    assert outside.envelope.route.curr == "c"
    assert outside.envelope.status is not None and outside.envelope.status.deadline_at == outer


def test_p_flow_8_fan_out_in_a_loop_gets_a_fresh_set_and_child_ids_per_iteration() -> None:
    program = _program("state = a(state)\nwhile True:\n    state['r'] = [b(x) for x in state['l']]")
    first = continue_outgoing(
        {"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {"l": [1, 2]}), now=NOW
    )
    assert [o.actor for o in first] == ["b", "b", "x-fanin-flow-f"]
    slice0 = first[-1].envelope
    assert slice0.id == "t" and slice0.route.curr == "x-fanin-flow-f" and slice0.route.next == []
    header = slice0.headers["x-asya-fan-in"]
    assert header == {"origin_id": "t", "slice_index": 0, "slice_count": 3, "aggregation_key": "/r", "set": "t/1"}
    assert [o.envelope.route.next for o in first[:2]] == [["x-fanin-flow-f"]] * 2
    again_state = FlowState.from_header(slice0.headers[STATE_HEADER])
    second = continue_outgoing(
        {"f": program},
        _end_of(program, "t", again_state, {"l": [1, 2], "r": [1, 4]}, prev=["a", "x-fanin-flow-f"]),
        now=NOW,
    )
    assert second[-1].envelope.headers["x-asya-fan-in"]["set"] == "t/2"
    assert {o.envelope.id for o in first[:2]}.isdisjoint({o.envelope.id for o in second[:2]})


def _failure(
    program: Program,
    state: FlowState,
    *,
    reason: str,
    error: dict[str, Any],
    env_id: str = "t",
    parent_id: str | None = None,
) -> routing.Outgoing:
    env = Envelope(
        id=env_id,
        parent_id=parent_id,
        route=Route(prev=["a"], curr="b", next=[]),
        payload={"error": "x"},
        headers={STATE_HEADER: state.to_header()},
        status=Status(phase=Phase.FAILED.value, reason=reason, actor="b", created_at=NOW, error=error),
    )
    return routing.Outgoing(actor=naming.SINK, envelope=env)


TRY = (
    "state = a(state)\ntry:\n    state = b(state)\n"
    "except TimeoutError:\n    state = c(state)\nexcept ValueError:\n    state = d(state)"
)


def test_p_flow_9_a_handler_timeout_is_caught_as_timeout_error() -> None:
    program = _program(TRY)
    [state] = [
        FlowState.from_header(o.envelope.headers[STATE_HEADER])
        for o in continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {}), now=NOW)
    ]
    caught = on_failure(
        {"f": program},
        _failure(program, state, reason="HandlerTimeout", error={"message": "slow", "type": "HandlerTimeout"}),
        original_payload={"in": 1},
        now=NOW,
    )
    assert caught is not None
    [out] = caught
    assert out.envelope.route.curr == "c" and out.envelope.route.prev == ["a", "b"]
    assert out.envelope.payload == {"in": 1}
    assert out.envelope.status is not None and out.envelope.status.error == {
        "message": "slow",
        "type": "HandlerTimeout",
    }


def test_p_flow_9_matching_uses_the_mro_and_unmatched_errors_are_not_caught() -> None:
    program = _program(TRY)
    [out] = continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {}), now=NOW)
    state = FlowState.from_header(out.envelope.headers[STATE_HEADER])
    boom = {"message": "m", "type": "mylib.Boom", "mro": ["ValueError", "Exception"]}
    caught = on_failure(
        {"f": program}, _failure(program, state, reason="PolicyExhausted", error=boom), original_payload={}, now=NOW
    )
    assert caught is not None and caught[0].envelope.route.curr == "d"
    other = {"message": "m", "type": "KeyError", "mro": ["LookupError", "Exception"]}
    assert (
        on_failure(
            {"f": program}, _failure(program, state, reason="RuntimeError", error=other), original_payload={}, now=NOW
        )
        is None
    )
    assert (
        on_failure(
            {"f": program}, _failure(program, state, reason="UnknownActor", error=boom), original_payload={}, now=NOW
        )
        is None
    )


def test_p_flow_10_a_failed_slice_resumes_under_the_merged_identity() -> None:
    program = _program(
        "state = a(state)\ntry:\n    state['r'] = [b(state), b(state)]\nexcept ValueError:\n    state = c(state)"
    )
    outs = continue_outgoing({"f": program}, _end_of(program, "t", FlowState("f", pc=1, owner="t"), {"s": 1}), now=NOW)
    child = outs[0].envelope
    state = FlowState.from_header(child.headers[STATE_HEADER])
    assert state.has_base and state.base == {"s": 1}
    failure = _failure(
        program,
        state,
        reason="RuntimeError",
        error={"message": "m", "type": "ValueError"},
        env_id=child.id,
        parent_id="t",
    )
    failure.envelope.route = child.route
    [first] = on_failure({"f": program}, failure, original_payload=child.payload, now=NOW) or []
    assert first.envelope.id == "t" and first.envelope.payload == {"s": 1}
    assert first.envelope.route.prev == ["a", "x-fanin-flow-f"] and first.envelope.route.curr == "c"


def test_p_flow_5_start_runs_the_first_test_at_create() -> None:
    program = _program("if state['x']:\n    state = a(state)\nelse:\n    state = b(state)")
    created = Envelope(id="t", route=Route(prev=[], curr="", next=[]), payload={"x": 0}, status=Status(created_at=NOW))
    [out] = start(program, created, now=NOW)
    assert out.actor == "b" and out.envelope.route.prev == [] and out.envelope.route.curr == "b"
    assert FlowState.from_header(out.envelope.headers[STATE_HEADER]).owner == "t"
