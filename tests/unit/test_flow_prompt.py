"""A pause's prompt computed from the state (P-FLOW-31): compiled from the expression subset, evaluated at the pause
by the bounded evaluator, and equal to what the plain-Python run of the same file builds; outside the subset it is a
compile error."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.flows import FlowCompileError, FlowError, FlowState, Program, advance, compile_flow, pause
from asya.flows.interp import MAX_PROMPT_BYTES

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)
SOURCE = """\
from asya.flows import flow, pause


@flow
async def publish(state):
    state = await draft(state)
    state = await pause(state, prompt="Publish " + state["title"] + " (" + str(len(state["text"])) + " chars)?")
    return state
"""


def _compile(body: str) -> Program:
    source = "async def f(state):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return compile_flow(source, flow="f", filename="flows/f.py", actors={"draft"})


def _paused_at(program: Program, payload: Any, pc: int) -> dict[str, Any]:
    step = advance(program, payload, FlowState(flow=program.flow, pc=pc), deadline_at=None, now=NOW)
    assert step.kind == "pause", step
    return dict(step.pause or {})


def test_p_flow_31_a_computed_prompt_is_evaluated_on_the_state_at_the_pause() -> None:
    program = compile_flow(SOURCE, flow="publish", filename="flows/publish.py", actors={"draft"})
    ins = program.code[1]
    # the source text is what asya flow show and the console draw; the expression is what runs
    assert ins["prompt"] == "'Publish ' + state['title'] + ' (' + str(len(state['text'])) + ' chars)?'"
    assert ins["prompt_expr"][0] == "bin"
    shown = _paused_at(program, {"title": "Q3 report", "text": "abcd"}, 1)
    # every pause carries the flow's cap as its timeout (P-WAIT-1)
    assert shown == {"prompt": "Publish Q3 report (4 chars)?", "fields": [], "timeout": 604800}


def test_p_flow_31_the_prompt_equals_the_plain_python_one() -> None:
    """The stand-in receives the same string the mesh computes: the file is its own oracle."""
    seen: list[str] = []
    namespace: dict[str, Any] = {}
    exec(compile(SOURCE, "flows/publish.py", "exec"), namespace)

    async def draft(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "title": "Q3 report", "text": "abcd"}

    def recording_pause(state: dict[str, Any], *, prompt: str, fields: Any = None) -> Any:
        seen.append(prompt)
        return pause(state, prompt=prompt, fields=fields)

    namespace["draft"], namespace["pause"] = draft, recording_pause
    asyncio.run(namespace["publish"]({}))
    program = compile_flow(SOURCE, flow="publish", filename="flows/publish.py", actors={"draft"})
    assert seen == [_paused_at(program, {"title": "Q3 report", "text": "abcd"}, 1)["prompt"]]


def test_p_flow_31_a_literal_prompt_compiles_as_before() -> None:
    """No ``prompt_expr`` on a literal: the program, and so its digest, of every existing flow is unchanged."""
    program = _compile('state = await draft(state)\nstate = await pause(state, prompt="Go?")')
    assert program.code[1] == {"op": "pause", "line": 3, "prompt": "Go?", "fields": []}


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        ("state['n']", r"pause at line 3: the prompt is a int, not a string"),
        ("state['title'] * 3000", rf"pause at line 3: the prompt is over {MAX_PROMPT_BYTES} bytes"),
        ("state['missing']", r"KeyError|missing"),
    ],
)
def test_p_flow_31_a_prompt_that_is_no_string_or_too_long_fails_the_task(prompt: str, error: str) -> None:
    program = _compile(f"state = await draft(state)\nstate = await pause(state, prompt={prompt})")
    with pytest.raises(FlowError, match=error):
        advance(program, {"n": 3, "title": "abc"}, FlowState(flow="f", pc=1), deadline_at=None, now=NOW)


def test_p_flow_31_the_stand_in_refuses_a_prompt_that_is_no_string() -> None:
    with pytest.raises(TypeError, match="pause's prompt must be a string, got int"):
        pause({}, prompt=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("f\"Publish {state['title']}?\"", 'an f-string prompt is outside the expression language; fix: "Publish " + '),
        ("open('p')", "the call `open(...)` is outside the expression language"),
        ("title", "unknown name 'title': flows have no variables"),
        ("lambda: 'x'", "is outside the expression language"),
        ("3", "pause takes prompt (a string) and fields (a list of objects)"),
    ],
)
def test_p_flow_31_a_prompt_outside_the_subset_is_a_compile_error(prompt: str, expected: str) -> None:
    with pytest.raises(FlowCompileError) as caught:
        _compile(f"state = await draft(state)\nstate = await pause(state, prompt={prompt})")
    problems = [str(p) for p in caught.value.problems]
    assert any(expected in p and p.startswith("flows/f.py:3:") for p in problems), problems
