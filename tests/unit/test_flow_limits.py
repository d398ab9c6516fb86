"""Pathological flow sources are compile errors, never a crash (P-FLOW-22): a parser or compiler out of depth, an
integer literal over the bound of evaluation, a source too large. ``asya flow check`` prints them like any other
error (no traceback), and a manifest whose flow does not compile is a manifest error."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from asya.flows import FlowCompileError, check_source, compile_flow
from asya.manifest import parse_manifest
from asya_local.cli import main

pytestmark = pytest.mark.unit


def elif_chain(branches: int) -> str:
    lines = ["async def f(state):", "    state = await a(state)"]
    for i in range(branches):
        lines += [f"    {'if' if i == 0 else 'elif'} state['k'] == {i}:", f"        state['v'] = {i}"]
    return "\n".join([*lines, "    return state", ""])


def hex_literal(digits: int) -> str:
    return f"async def f(state):\n    state['n'] = 0x{'f' * digits}\n    state = await a(state)\n"


def nested_list(depth: int) -> str:
    return f"async def f(state):\n    state['n'] = {'[' * depth}1{']' * depth}\n    state = await a(state)\n"


def long_sum(terms: int) -> str:
    return f"async def f(state):\n    state['n'] = {' + '.join(['1'] * terms)}\n    state = await a(state)\n"


PATHOLOGICAL = {
    "a 5,000-branch elif chain": (elif_chain(5000), "nested too deeply"),
    "a 5,000-digit hex literal": (hex_literal(5000), "integer literal"),
    "a 20,000-term sum": (long_sum(20_000), "nested too deeply"),
    "a list literal 3,000 levels deep": (nested_list(3000), "too many nested parentheses"),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_p_flow_22_a_pathological_source_is_a_compile_error(name: str) -> None:
    source, expected = PATHOLOGICAL[name]
    with pytest.raises(FlowCompileError) as caught:
        compile_flow(source, flow="f", filename="p.py")
    assert expected in str(caught.value)
    problems = check_source(source, filename="p.py")
    assert problems and expected in str(problems[0])


def test_p_flow_22_a_large_integer_literal_within_the_bound_compiles() -> None:
    program = compile_flow(hex_literal(60), flow="f")
    assert program.code[0]["op"] == "set"


def test_p_flow_22_asya_flow_check_prints_the_error_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.py"
    path.write_text(elif_chain(5000))
    out, err = io.StringIO(), io.StringIO()
    code = main(["flow", "check", str(path), "--no-manifest"], env={}, stdout=out, stderr=err)
    assert code == 1
    assert "Traceback" not in out.getvalue() + err.getvalue()
    assert f"{path}:1:1:" in out.getvalue() and "nested too deeply" in out.getvalue()


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_p_flow_22_a_manifest_with_such_a_flow_is_refused_with_its_error(tmp_path: Path, name: str) -> None:
    source, expected = PATHOLOGICAL[name]
    (tmp_path / "f.py").write_text(source)
    data = {"namespace": "demo", "actors": {"a": {"handler": "m.a"}}, "flows": {"f": {"source": "f.py"}}}
    with pytest.raises(ValueError, match=r"flows\.f\.source: the flow does not compile") as caught:
        parse_manifest(data, base_dir=tmp_path)
    assert expected in str(caught.value)
