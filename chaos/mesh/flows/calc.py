# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler; the plain run binds them)
# mypy: disable-error-code="name-defined, untyped-decorator"
"""The chaos mesh's compiled flow (``make chaos``): a branch, a mutation and a loop around two actors, so the flow
faults (a handler that SETs a layer header, an actor that returns two payloads) meet continuations in the layer.
The checker runs this file as plain Python too (``chaos.flowplain``) and compares each task with that run."""

from __future__ import annotations

from typing import Any

from asya.flows import flow


@flow(max_iterations=10)
async def calc(state: dict[str, Any]) -> dict[str, Any]:
    state = await inc(state)
    if state["n"] % 2 == 0:
        state = await double(state)
    else:
        state["odd"] = True
    while state["n"] < 6:
        state = await inc(state)
    state["done"] = True
    return state
