"""Faults of a compiled flow inside an actor's layer, against moto: a continuation that crashes (P-FLOW-20) and an
actor that returns two payloads (P-FLOW-11). Each fails the task once, through x-sink, naming the right actor; the
record is acked, so the handler before it is never run again, and nothing goes downstream."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from asya.flows import compile_flow
from tests.functional.actors import NOW, Harness, envelope

pytestmark = pytest.mark.functional

FLOW = "faulty"

# the handler's payload travels (400 levels); the loop nests it 300 levels deeper, past what a copy can recurse into
COPY_DEEP = """
async def faulty(state):
    state = await normalize(state)
    while state["n"] < 30:
        state["n"] += 1
        state["nest"] = [[[[[[[[[[state["nest"]]]]]]]]]]]
    state = await analyze(state)
    return state
"""

# ``inc; two; inc; double; echo`` with the example mesh's actors: ``normalize`` is ``two``
SECOND_PAYLOAD = """
async def faulty(state):
    state = await analyze(state)
    state = await normalize(state)
    state = await analyze(state)
    state = await summarize(state)
    state = await publish(state)
    return state
"""


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, source: str) -> Harness:
        program = compile_flow(source, flow=FLOW)
        flows = json.dumps({FLOW: program.to_json()})
        made = Harness(mesh, handler, module="flow_fault_handlers", clock=lambda: NOW, env={"ASYA_FLOWS": flows})
        _calls().clear()
        return made

    return make


def _calls() -> list[str]:
    """The handler calls of the module as the runtime loaded it (from the handlers directory, by its own name)."""
    calls: list[str] = sys.modules["flow_fault_handlers"].calls()
    return calls


def _flow_envelope(task_id: str, *, nxt: list[str], pc: int, prev: list[str] | None = None) -> dict[str, Any]:
    state = {"flow": FLOW, "pc": pc, "owner": task_id}
    headers = {"x-asya-flow": FLOW, "x-asya-flow-state": state}
    return envelope(task_id, prev=prev, nxt=nxt, headers=headers, payload={"n": 0})


def test_p_flow_20_a_crashing_continuation_fails_the_task_once_and_never_reruns_the_handler(
    harness: Callable[..., Harness],
) -> None:
    h = harness("deep", COPY_DEEP)
    h.store.create_task(task_id="t-deep", actor="normalize", payload={"n": 0})
    _, failed = h.run(_flow_envelope("t-deep", nxt=[], pc=1))
    assert failed == []  # the record is acked: SQS never brings the hop back
    assert _calls() == ["deep"]
    (sink,) = h.drain("x-sink")
    assert sink["id"] == "t-deep"
    assert sink["status"]["phase"] == "failed"
    assert sink["status"]["actor"] == "normalize"
    error = sink["status"]["error"]
    assert error["type"] == "asya.flows.errors.FlowError"
    assert "RecursionError" in error["message"]
    assert h.drain("analyze") == [] and h.drain("x-sump") == []


def test_p_flow_11_a_second_payload_fails_the_hop_that_sent_it(harness: Callable[..., Harness]) -> None:
    """``inc; two; inc; double; echo`` in one route segment: ``two`` (here the actor ``normalize``) returns two
    payloads; the task fails naming it, and neither payload reaches the next actor."""
    h = harness("two", SECOND_PAYLOAD)
    h.store.create_task(task_id="t-two", actor="normalize", payload={"n": 0})
    body = _flow_envelope("t-two", prev=["analyze"], nxt=["analyze", "summarize", "publish"], pc=5)
    _, failed = h.run(body)
    assert failed == []
    assert _calls() == ["two"]
    (sink,) = h.drain("x-sink")
    assert sink["id"] == "t-two"
    assert sink["status"]["phase"] == "failed"
    assert sink["status"]["actor"] == "normalize"
    error = sink["status"]["error"]
    assert error["type"] == "asya.flows.errors.FlowError"
    assert "actor 'normalize' returned more than one payload in flow 'faulty'" in error["message"]
    assert h.drain("analyze") == []  # nothing downstream, on either payload
    assert h.drain("x-sump") == []
