# ruff: noqa: F821  (the actors are names of the example manifest, resolved by the compiler)
"""The flow the cost row of ``bench/flows.py`` (``make bench``) runs: a branch, a loop of 3 iterations and a 3-way
fan-out, written as Python and compiled to continuations (docs/flows.md)."""

from asya.flows import flow


@flow
def bench_flow(state):
    state = normalize(state)
    if "good" in state["normalized"]:
        state["tone"] = "positive"
    else:
        state["tone"] = "other"
    state["round"] = 0
    while state["round"] < 3:
        state["round"] += 1
        state = analyze(state)
    state["sections"] = [summarize_chunk(part) for part in state["parts"]]
    return state
