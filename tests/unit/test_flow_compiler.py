"""The flow compiler's errors (docs/flows.md "Compile errors"): every error's text, with file, line, column and fix,
and every error of a file at once; the compiled program of the issue's example (P-FLOW-1)."""

from __future__ import annotations

import json
import textwrap

import pytest

from asya.flows import FlowCompileError, Program, check_source, compile_flow

pytestmark = pytest.mark.unit

ACTORS = {"a", "b", "summarize-chunk"}


def _problems(body: str, *, header: str = "def f(state):\n", actors: set[str] | None = ACTORS) -> list[str]:
    source = header + textwrap.indent(textwrap.dedent(body), "    ")
    with pytest.raises(FlowCompileError) as caught:
        compile_flow(source, flow="f", filename="flows/f.py", actors=actors)
    return [str(p) for p in caught.value.problems]


CASES = [
    (
        "for x in state['l']:\n    state = a(state)",
        "flows/f.py:2:5: `for` is not supported in a flow; fix: `for` exists only as a map",
    ),
    ("import os", "flows/f.py:2:5: `import` is not supported in a flow; fix: import at the top of the module"),
    ("from os import path", "`import` is not supported in a flow; fix: import at the top of the module"),
    ("raise ValueError()", "`raise` is not supported in a flow; fix: a flow cannot raise"),
    ("del state['x']", "`delete` is not supported in a flow; fix: set the key to None instead"),
    ("global g", "`global` is not supported in a flow"),
    ("class C: pass", "`classdef` is not supported in a flow; fix: define classes outside the flow function"),
    ("def g(): pass", "`def` is not supported in a flow; fix: define functions outside the flow function"),
    ("assert state['x']", "`assert` is not supported in a flow"),
    ("state['x']: int = 1", "`annassign` is not supported in a flow; fix: drop the annotation"),
    ("state = x = a(state)", "flows/f.py:2:5: an assignment with two targets; fix: one target per assignment"),
    (
        "state, y = a(state)",
        "an assignment to a tuple, attribute or other target; fix: assign one payload path at a time",
    ),
    (
        "x = 1",
        "flows/f.py:2:5: flows have no local variables ('x'); fix: store the value in the payload: state[\"x\"] = ...",
    ),
    (
        "state['r'] = a(state)",
        "an actor's result replaces the whole state; it cannot be assigned to part of it; fix: state = await a(state)",
    ),
    ("a(state)", "the result of 'a' is dropped; fix: state = await a(state)"),
    ("state = a(state['x'])", "an actor is called with the state only; fix: a(state)"),
    ("state = a(b(state))", "nested calls in 'a(...)'; fix: one call per statement"),
    ("state = nope(state)", "'nope' is not an actor of the manifest; fix: call one of: a, b, summarize-chunk"),
    ("state['x'] = open('f')", "the call `open(...)` is outside the expression language; fix: use len, min, max"),
    (
        "state['x'] = len(a(state))",
        "the actor call 'a(...)' is nested in an expression; fix: call it in its own statement",
    ),
    ("state['x'] = state.keys()", "the call `state.keys(...)` is outside the expression language"),
    ("state['x'] = state['y'] ** 2", "the operator Pow is not supported; fix: use + - * / // %"),
    ("state['x'] = lambda: 1", "`lambda: 1` is outside the expression language"),
    ("state['x'] = f'{state}'", "is outside the expression language"),
    ("state['x'] = y", "unknown name 'y': flows have no variables; fix: read it from the state: state[\"y\"]"),
    ("state['x'] = state['l'][1:]", "slices are not supported; fix: index one key or position"),
    ("state['x'] = state['y'] is 3", "`is` compares with None, True or False only; fix: use == for values"),
    ("state['x'] = {**state}", "`**` in a dict literal is not supported"),
    ("state['x'] = ~state['y']", "the operator ~ is not supported"),
    ("state['x'] = b'raw'", "the literal b'raw' is not JSON"),
    ("state[state['k']] = [a(state), b(state)]", "a fan-out's target must be a constant payload path"),
    ("state['r'] = [a(x) for x in state['l'] if x]", "a map has one `for` and no `if`"),
    ("state['r'] = [a(x) for x in range(3)]", "a map runs over a payload list"),
    ("state['r'] = [a(state) for x in state['l']]", "an actor is called with the item only; fix: a(x)"),
    ("state['r'] = [x for x in state['l']]", "a map's element is one actor call of the loop variable"),
    ("state['r'] = len([a(x) for x in state['l']])", "a comprehension is a map and must be assigned to a payload path"),
    ("state['r'] = asyncio.gather(a(state), 3)", "asyncio.gather(...) takes actor calls only"),
    ("break", "flows/f.py:2:5: `break` outside a loop; fix: use `break` only inside `while`"),
    ("continue", "`continue` outside a loop"),
    ("while state['x']:\n    state = a(state)\nelse:\n    pass", "`while ... else` is not supported"),
    ("try:\n    state = a(state)\nexcept:\n    pass", "a bare `except:` is not supported"),
    ("try:\n    state = a(state)\nexcept ValueError as e:\n    pass", "`except ... as e` is not supported"),
    ("try:\n    state = a(state)\nfinally:\n    pass", "`try ... finally` is not supported"),
    ("try:\n    state = a(state)\nexcept ValueError:\n    pass\nelse:\n    pass", "`try ... else` is not supported"),
    ("try:\n    state = a(state)\nexcept errors[0]:\n    pass", "an except clause names exception classes only"),
    ("with open('f'):\n    pass", "`with` is supported only as a timeout block; fix: async with timeout(30):"),
    ("with timeout(-1):\n    pass", "timeout(...) takes one positive number literal, the seconds"),
    ("with timeout(state['t']):\n    pass", "timeout(...) takes one positive number literal"),
    (
        "state = a(state)\nstate = pause(state, prompt=state['p'], fields=state['f'])",
        "pause's fields must be a literal",
    ),
    ("state = a(state)\nstate = pause(state['x'])", "pause(...) takes the state as its one positional argument"),
    (
        "state = a(state)\nstate = pause(state, prompt=3)",
        "pause takes prompt (a string) and fields (a list of objects)",
    ),
    ("return", "a flow returns its state; fix: return state"),
    ("return state['x']", "a flow returns its state"),
    ("state['x'] + 1", "an expression statement has no effect in a flow"),
    ("state['x'] = await 3", "`await` of something other than an actor call or pause"),
    ("state['n'] <<= 1", "the operator LShift is not supported"),
    ("x += 1", "augmented assignment to something other than a payload path"),
    ("match state:\n    case _:\n        pass", "`match` is not supported in a flow; fix: use if/elif/else"),
]


@pytest.mark.parametrize(("body", "expected"), CASES, ids=[c[1][:60] for c in CASES])
def test_compile_error_text(body: str, expected: str) -> None:
    problems = _problems(body)
    assert any(expected in p for p in problems), problems


def test_syntax_error_names_file_line_and_column() -> None:
    with pytest.raises(FlowCompileError) as caught:
        compile_flow("def f(state):\n    state = = a(state)\n", flow="f", filename="flows/f.py")
    assert str(caught.value).startswith("flows/f.py:2:")
    assert "syntax error" in str(caught.value)


def test_parameters_and_decorators() -> None:
    assert any(
        "flow 'f' must take exactly one parameter, the state; fix: async def f(state):" in p
        for p in _problems("pass", header="def f(state, other):\n")
    )
    assert any(
        "a flow function takes no decorator but @flow" in p for p in _problems("pass", header="@cache\ndef f(state):\n")
    )
    assert any(
        "@flow takes only max_iterations, a positive integer literal; fix: @flow(max_iterations=10)" in p
        for p in _problems("pass", header="@flow(max_iterations=0)\ndef f(state):\n")
    )


def test_no_flow_function() -> None:
    with pytest.raises(FlowCompileError) as caught:
        compile_flow("def g(s):\n    pass\ndef h(s):\n    pass\n", flow="f", filename="flows/f.py")
    assert "no flow function for flow 'f'; fix: name the function f or decorate exactly one function with @flow" in str(
        caught.value
    )
    assert check_source("x = 1\n", filename="flows/f.py")[0].message == "no flow function"


def test_every_error_of_a_file_is_reported_at_once() -> None:
    problems = _problems("import os\nx = 1\nstate = nope(state)\nfor i in state['l']:\n    pass\n")
    assert [p.split(":")[1] for p in problems] == ["2", "3", "4", "5"]


def test_unknown_actor_without_manifest_is_accepted() -> None:
    program = compile_flow("def f(state):\n    state = summarize_chunk(state)\n", flow="f", actors=None)
    assert program.initial_route == ("summarize-chunk",)


def test_issue_example_compiles_to_json_program() -> None:
    """P-FLOW-1: the program is JSON and round-trips through the manifest form."""
    source = textwrap.dedent(
        """
        import asyncio
        from asya.flows import flow

        @flow(max_iterations=7)
        async def review(state):
            state = await classify(state)
            if state["category"] == "urgent":
                state = await escalate(state)
            else:
                state["queue"] = "standard"
                state = await standard_review(state)
            state["reviews"] = [grammar(state), facts(state), tone(state)]
            while state["score"] < 0.8 and state["round"] < 3:
                state["round"] += 1
                state = await revise(state)
            try:
                state = await publish(state)
            except ConnectionError:
                state = await queue_for_later(state)
            return state
        """
    )
    program = compile_flow(source, flow="review")
    assert program.initial_route == ("classify",)
    assert program.max_iterations == 7
    assert program.aggregator == "x-fanin-flow-review"
    ops = [i["op"] for i in program.code]
    assert ops.count("call") == 6 and "fanout" in ops and "try" in ops and "loop" in ops
    again = Program.from_json(json.loads(json.dumps(program.to_json())))
    assert again == program
