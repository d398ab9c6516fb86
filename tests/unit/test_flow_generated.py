"""The subset is total (P-FLOW-23): generated flow programs (tests/flowgen.py) of every construct of docs/flows.md
agree with their plain-Python run, through the real continuations and the in-process simulator (tests/flowsim.py):
same result or same error type, and the same actors in the same order where plain Python calls them all. Each
construct is tested first, in the middle and last; a program's bulk run covers them mixed and nested."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.flowgen import CONSTRUCTS, RESUME, FlowProgram, flow_programs, payloads
from tests.flowgen_actors import ACTORS
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

# no deadline and no too_slow check: both are wall-clock bounds, which a loaded 2-core box overruns
_SETTINGS = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": list(HealthCheck)}


def _agree(program: FlowProgram, payload: dict[str, Any]) -> None:
    plain = plain_run(program.namespace(), program.name, ACTORS, payload, resume=RESUME)
    compiled = simulate(program.compile(), ACTORS, payload, resume=RESUME)
    assert compiled.key() == plain.key(), program.source
    if program.exact_calls:
        assert compiled.calls == plain.calls, program.source


@settings(max_examples=400, **_SETTINGS)  # type: ignore[call-overload]
@given(flow_programs(), payloads())
def test_generated_programs_agree_with_plain_python(program: FlowProgram, payload: dict[str, Any]) -> None:
    _agree(program, payload)


@pytest.mark.parametrize("position", ["lead", "middle", "tail"])
@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_each_construct_in_each_position_agrees_with_plain_python(construct: str, position: str) -> None:
    @settings(max_examples=40, **_SETTINGS)  # type: ignore[call-overload]
    @given(flow_programs(max_statements=3, **{position: construct}), payloads())
    def check(program: FlowProgram, payload: dict[str, Any]) -> None:
        _agree(program, payload)

    check()


@pytest.mark.parametrize(
    ("first", "expected_calls"),
    [
        ('state["r"] = [inc(state), dbl(state), check(state)]', ["inc", "dbl", "check"]),
        ('state["m"] = [dbl(x) for x in state["items"]]', ["dbl", "dbl"]),
        ('state = pause(state, prompt="Go on?", fields=[])', []),
        ("try:\n        state = check(state)\n    except ValueError:\n        state['caught'] = True", ["check"]),
        ("return state", []),
    ],
    ids=["fanout", "map", "pause", "try", "return"],
)
def test_a_flow_may_start_with_any_construct_and_end_with_it(first: str, expected_calls: list[str]) -> None:
    """The construct is the whole flow: first and last at once, with nothing but the state to start from."""
    source = f"from asya.flows import flow, pause\n\n\n@flow\ndef only(state):\n    {first}\n    return state\n"
    program = FlowProgram(name="only", source=source, exact_calls=True, pauses="pause" in first)
    payload = {"n": 2, "log": [], "items": [1, 2]}
    _agree(program, payload)
    assert simulate(program.compile(), ACTORS, payload, resume=RESUME).calls == expected_calls


@settings(max_examples=100, **_SETTINGS)  # type: ignore[call-overload]
@given(flow_programs(), payloads())
def test_generated_programs_redelivered_end_the_same(program: FlowProgram, payload: dict[str, Any]) -> None:
    """P-FLOW-2: every envelope delivered twice (a fan-out, a pause or a return first included): the fences absorb
    the copies, the outcome and the calls are those of one delivery."""
    compiled = program.compile()
    once = simulate(compiled, ACTORS, payload, resume=RESUME)
    twice = simulate(compiled, ACTORS, payload, resume=RESUME, duplicate_every=True)
    assert twice.key() == once.key(), program.source
    assert twice.calls == once.calls, program.source
