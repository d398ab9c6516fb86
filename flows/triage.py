# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""The example mesh's flow written as Python (docs/flows.md): a branch, a map fan-out, a bounded loop and a
try/except, compiled to continuations that run inside the layer, so none of them costs a hop."""

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
    state["sections"] = [summarize_chunk(part) for part in state.get("parts", [])]
    state["rounds"] = 0
    while state["words"] > state.get("max_words", 20) and state["rounds"] < 3:
        state["rounds"] += 1
        state = shorten(state)
    try:
        state = deliver(state)
    except ConnectionError:
        state["delivered"] = False
        state = publish(state)
    return state
