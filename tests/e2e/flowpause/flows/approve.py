# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""Pause inside a branch (the flow state survives x-pause and x-resume, P-FLOW-7) and a timeout block (P-FLOW-12)."""

from asya.flows import flow, pause, timeout


@flow
def approve(state):
    state = normalize(state)
    state = analyze(state)
    if state["sentiment"] != "negative":
        state = pause(state, prompt="Publish it?", fields=[{"name": "approved", "type": "boolean"}])
        with timeout(60):
            state = publish(state)
        state["checked"] = True
    else:
        state["approved"] = False
    return state
