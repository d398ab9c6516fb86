"""Flows written as Python (docs/flows.md, P-FLOW-1..13).

- :mod:`asya.flows.compiler`: the flow source (parsed with ``ast``, never run) to a :class:`Program`;
- :mod:`asya.flows.interp` and :mod:`asya.flows.expr`: the continuation interpreter the runtime runs;
- :mod:`asya.flows.mesh`: continuations applied to envelopes (the layer, the gateway, the aggregator, x-resume);
- :mod:`asya.flows.render`: Graphviz DOT and Mermaid text of a program;
- :mod:`asya.flows.dsl`: ``flow``, ``map``, ``pause``, ``sleep``, ``wait_for`` and ``timeout`` stand-ins so a flow
  file also runs as plain Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asya.flows.dsl import flow, map, pause, sleep, timeout, wait_for
from asya.flows.errors import FlowCompileError, FlowError, Problem
from asya.flows.interp import STATE_HEADER, FlowState, Step, advance, dispatch
from asya.flows.ir import DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_PAUSE, Program, aggregator_name
from asya.flows.mesh import continue_outgoing, is_flow_end, on_failure, start

if TYPE_CHECKING:
    from asya.flows.compiler import check_source, compile_flow

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_MAX_PAUSE",
    "STATE_HEADER",
    "FlowCompileError",
    "FlowError",
    "FlowState",
    "Problem",
    "Program",
    "Step",
    "advance",
    "aggregator_name",
    "check_source",
    "compile_flow",
    "continue_outgoing",
    "dispatch",
    "flow",
    "is_flow_end",
    "map",
    "on_failure",
    "pause",
    "sleep",
    "start",
    "timeout",
    "wait_for",
]


def __getattr__(name: str) -> Any:
    # the compiler (and ``ast``) loads only where flows are compiled: the manifest, the CLI, tests; an actor Lambda
    # only interprets programs and never pays for it at cold start
    if name in ("check_source", "compile_flow"):
        from asya.flows import compiler

        return getattr(compiler, name)
    raise AttributeError(f"module 'asya.flows' has no attribute {name!r}")
