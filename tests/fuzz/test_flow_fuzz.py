"""The flow fuzz tier (P-FLOW-20..22, P-FLOW-30): generated flow programs (tests/flowgen.py, the generator the
equivalence tests share) with random payloads, through the compiler, the continuation interpreter and the simulated
mesh (tests/flowsim.py). ``wild`` programs hold partial expressions (a missing key, a division by a payload value, an
index past the end) and loops that run past ``max_iterations``, on payloads of any shape.

- Each program compiles, and its run gives the plain-Python answer or fails with ``FlowError``: never another
  exception, never a hang. A hang is a task that has not ended after :data:`HANG_ENVELOPES` envelopes (a generated
  program sends a few hundred at most); inside one continuation the interpreter's own step bound holds.
- A generated program with one statement outside the language spliced in is a compile error, never a crash.
- Pathological sources (depth, size, literals) are compile errors reported by the compiler in its child process
  (``asya.flows.isolated``): the child answers, it does not die.

Fixed seed (``derandomize``), no database; the example counts keep the tier well under 60 s on a loaded 2-core box.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asya.flows import FlowCompileError, check_source
from asya.flows.isolated import check_isolated
from tests.flowgen import RESUME, FlowProgram, flow_programs, payloads
from tests.flowgen_actors import ACTORS
from tests.flowsim import FLOW, plain_run, simulate

pytestmark = pytest.mark.fuzz

#: The envelopes after which a simulated task that has not ended is a hang.
HANG_ENVELOPES: Final = 5_000
# no deadline and no too_slow check: both are wall-clock bounds, which a loaded 2-core box overruns
_FIXED = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": list(HealthCheck)}


@settings(max_examples=1000, **_FIXED)  # type: ignore[call-overload]
@given(flow_programs(wild=True), payloads(wild=True))
def test_a_program_gives_the_plain_python_answer_or_a_flow_error(program: FlowProgram, payload: Any) -> None:
    compiled = program.compile()
    outcome = simulate(compiled, ACTORS, payload, resume=RESUME, max_envelopes=HANG_ENVELOPES)
    if outcome.ok or outcome.error_type != FLOW:
        plain = plain_run(program.namespace(), program.name, ACTORS, payload, resume=RESUME)
        assert outcome.key() == plain.key(), program.source


_OUTSIDE: Final = (
    "import os",
    "del state['n']",
    "raise ValueError('x')",
    "for x in state['items']:\n    pass",
    "x = 1",
    "state['n'] = state['n'] ** 2",
    "state['n'] = (lambda: 1)()",
    "state['s'] = f\"{state['n']}\"",
    "state = a(b(state))",
    "state['r'] = [inc(x) for x in state['items'] if x]",
    # a prompt may be an expression of the language (P-FLOW-31), an f-string is not
    "state = pause(state, prompt=f\"{state['p']}\")",
    "with open('f'):\n    pass",
    "global state",
    "class C:\n    pass",
    "try:\n    pass\nfinally:\n    pass",
    "state = nope(state)",
    "state['r'] = [inc(state), 3]",
    "break",
    "state['n'] = 0x" + "f" * 80,
)


@settings(max_examples=300, **_FIXED)  # type: ignore[call-overload]
@given(flow_programs(max_statements=3), st.sampled_from(_OUTSIDE), st.data())
def test_a_statement_outside_the_language_is_a_compile_error(program: FlowProgram, bad: str, data: Any) -> None:
    lines = program.source.splitlines()
    body = [i for i, line in enumerate(lines) if line.startswith("    ") and not line.startswith("     ")]
    at = data.draw(st.sampled_from(body))
    spliced = [*lines[:at], *(f"    {line}" for line in bad.splitlines()), *lines[at:]]
    source = "\n".join(spliced) + "\n"
    problems = check_source(source, filename="flows/gen.py", actors=set(ACTORS))
    assert problems, source
    assert all(p.file == "flows/gen.py" and p.line >= 1 and p.message for p in problems)
    with pytest.raises(FlowCompileError):
        FlowProgram(program.name, source, exact_calls=True, pauses=False).compile()


def _elif_chain(size: int) -> str:
    lines = [f"    {'if' if i == 0 else 'elif'} state['k'] == {i}:\n        state['v'] = {i}" for i in range(size)]
    return "\n".join(lines)


_PATHOLOGICAL: Final = {
    # depth
    "elif chain": (st.integers(5_000, 8_000), _elif_chain, "nested too deeply"),
    "long sum": (st.integers(20_000, 40_000), lambda n: f"    state['n'] = {' + '.join(['1'] * n)}", "nested"),
    "nested list": (st.integers(201, 3_000), lambda n: f"    state['n'] = {'[' * n}1{']' * n}", "nested"),
    "nested parentheses": (st.integers(201, 3_000), lambda n: f"    state['n'] = {'(' * n}1{')' * n}", "nested"),
    "unary minus chain": (st.integers(20_000, 40_000), lambda n: f"    state['n'] = {'-' * n}1", "nested"),
    "nested ifs": (
        st.integers(101, 300),
        lambda n: "\n".join(f"{'    ' * (i + 1)}if state['n'] > {i}:" for i in range(n)) + f"\n{'    ' * (n + 1)}pass",
        "",
    ),
    # literals
    "decimal literal": (st.integers(78, 5_000), lambda n: f"    state['n'] = {'9' * n}", "integer literal"),
    "hex literal": (st.integers(65, 5_000), lambda n: f"    state['n'] = 0x{'f' * n}", "integer literal"),
    "float literal": (st.integers(309, 5_000), lambda n: f"    state['n'] = 1e{n}", "is not JSON"),
    # size
    "file over 1 MiB": (
        st.integers(1, 64),
        lambda n: "    state = inc(state)\n" + f"    # {'x' * 1022}\n" * (1024 + n),
        "over the limit",
    ),
    "string literal over 4 MiB": (st.integers(1, 64), lambda n: f"    state['s'] = '{'x' * (4 * 2**20 + n)}'", ""),
}


@settings(max_examples=22, **_FIXED)  # type: ignore[call-overload]
@given(st.sampled_from(sorted(_PATHOLOGICAL)), st.data())
def test_a_pathological_source_is_a_compile_error_never_a_crash(kind: str, data: Any) -> None:
    sizes, body, expected = _PATHOLOGICAL[kind]
    source = f"def gen(state):\n    state = inc(state)\n{body(data.draw(sizes))}\n    return state\n"
    problems = check_isolated(source, filename="flows/gen.py", actors=set(ACTORS))
    assert problems, kind
    messages = " | ".join(p.message for p in problems)
    assert "died" not in messages and "did not finish" not in messages, messages  # the compiler answered
    assert expected in messages, messages
    assert all(p.fix for p in problems)
