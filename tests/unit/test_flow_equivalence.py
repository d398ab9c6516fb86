"""The flow compiler's correctness test (P-FLOW-2..13): every corpus flow (tests/flows) gives the same outcome run as
plain Python with its actors as ordinary functions and run compiled, through the continuations and a simulated
mesh (tests/flowsim.py), for hypothesis-generated payloads; the actors that ran are the same, in the same order."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from asya.flows import compile_flow
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[1] / "flows"
NAMES = sorted(p.stem for p in CORPUS.glob("*.py") if p.stem != "__init__")


def _load(name: str) -> tuple[Any, Any]:
    module = importlib.import_module(f"tests.flows.{name}")
    source = (CORPUS / f"{name}.py").read_text()
    program = compile_flow(source, flow=name, filename=f"tests/flows/{name}.py", actors=set(module.ACTORS))
    return module, program


@pytest.mark.parametrize("name", NAMES)
def test_corpus_flow_compiles(name: str) -> None:
    _, program = _load(name)
    assert program.code and program.actors


@pytest.mark.parametrize("name", NAMES)
def test_compiled_flow_equals_plain_python(name: str) -> None:
    """P-FLOW-2: compiled continuations and plain Python agree on result, failure type and the actors called."""
    module, program = _load(name)
    resume = getattr(module, "RESUME", None)

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(module.payloads())
    def check(payload: dict[str, Any]) -> None:
        plain = plain_run(vars(module), name, module.ACTORS, payload, resume=resume)
        compiled = simulate(program, module.ACTORS, payload, resume=resume)
        assert compiled.key() == plain.key()
        assert compiled.calls == plain.calls

    check()


@pytest.mark.parametrize("name", NAMES)
def test_redelivered_hops_do_not_change_the_outcome(name: str) -> None:
    """P-FLOW-2: every envelope delivered twice; the hop fences absorb the copies, the outcome is the same."""
    module, program = _load(name)
    resume = getattr(module, "RESUME", None)

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(module.payloads())
    def check(payload: dict[str, Any]) -> None:
        once = simulate(program, module.ACTORS, payload, resume=resume)
        twice = simulate(program, module.ACTORS, payload, resume=resume, duplicate_every=True)
        assert twice.key() == once.key()
        assert twice.calls == once.calls

    check()
