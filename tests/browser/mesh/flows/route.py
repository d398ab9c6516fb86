# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""The browser mesh's compiled flow (docs/flows.md): a branch on the payload, so the console's drawing of the flow
has two arms and a finished task's path highlights one of them."""

from asya.flows import flow


@flow
def route(state):
    state = draft(state)
    if state["topic"] == "long":
        state["length"] = "long"
        state = linger(state)
    else:
        state["length"] = "short"
    state = review(state)
    return state
