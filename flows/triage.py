# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""The example mesh's flow written as Python (docs/flows.md): a branch, a map fan-out inside a try, a bounded loop,
compiled to continuations that run inside the layer, so none of the tests and mutations costs a hop."""

from asya.flows import flow


@flow(max_iterations=5)
def triage(state):
    state = normalize(state)
    state = analyze(state)
    if state["sentiment"] == "negative":
        state["priority"] = "high"
        state = summarize(state)
    else:
        state["priority"] = "normal"
    try:
        state["sections"] = [summarize_chunk(part) for part in state.get("parts", [])]
    except KeyError:
        state["sections"] = "unreadable parts"
    state["rounds"] = 0
    while state["rounds"] < state.get("reviews", 0):
        state["rounds"] += 1
        state = analyze(state)
    return state
