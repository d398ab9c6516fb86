"""Flows are compiled in a child process by the tools (P-FLOW-22): a parse that kills the interpreter kills only the
child, and comes back as a compile error; the result is the compiler's own, problems or program."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path

import pytest

from asya.flows import FlowCompileError, compile_flow
from asya_local.devloop import DevLoop, DevOptions
from tests.unit.test_flow_limits import elif_chain

pytestmark = pytest.mark.unit

GOOD = "async def f(state):\n    state = await a(state)\n    state['n'] = 1\n"


def test_p_flow_22_the_child_compiles_the_same_program() -> None:
    from asya.flows.isolated import compile_isolated

    assert compile_isolated(GOOD, flow="f", filename="f.py", actors={"a"}) == compile_flow(
        GOOD, flow="f", filename="f.py"
    )


def test_p_flow_22_the_childs_problems_come_back_as_compile_errors() -> None:
    from asya.flows.isolated import check_isolated, compile_isolated

    with pytest.raises(FlowCompileError, match="nested too deeply"):
        compile_isolated(elif_chain(5000), flow="f", filename="deep.py", actors={"a"})
    (problem,) = check_isolated(elif_chain(5000), filename="deep.py", actors=None)
    assert problem.file == "deep.py" and "nested too deeply" in problem.message


def test_p_flow_22_a_child_that_dies_is_a_compile_error_not_a_crash() -> None:
    """The child here is killed by a signal, as a stack overflow in the parser would kill it."""
    from asya.flows.isolated import compile_isolated

    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    with pytest.raises(FlowCompileError, match="the flow compiler died") as caught:
        compile_isolated(GOOD + "# another text\n", flow="f", filename="f.py", actors=None, command=killed)
    assert caught.value.problems[0].file == "f.py"


def test_p_flow_22_asya_dev_refuses_a_manifest_whose_flow_does_not_compile(tmp_path: Path) -> None:
    """The reload path: the error is reported and the running mesh is kept (no mesh runs in this test; the loop's
    answer ``None`` is what keeps the previous one serving)."""
    (tmp_path / "deep.py").write_text(elif_chain(5000))
    manifest = tmp_path / "asya.yaml"
    manifest.write_text(
        "namespace: demo\nactors:\n  a:\n    handler: m.a\nflows:\n  f:\n    source: deep.py\n", encoding="utf-8"
    )
    err = io.StringIO()
    loop = DevLoop(DevOptions(manifest=str(manifest)), out=io.StringIO(), err=err, stop=threading.Event())
    assert loop.reloaded_manifest() is None
    assert "still serving the previous one" in err.getvalue()
    assert "nested too deeply" in err.getvalue()
