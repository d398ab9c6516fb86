# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""The browser mesh's flow with a loop, a pause and a call after it (docs/flows.md): a finished task's drawn path
goes round the loop, through the pause and on to the end; its drawing is taller than the console's box."""

from asya.flows import flow, pause


@flow(max_iterations=5)
def revise(state):
    state = draft(state)
    while state["round"] < 2:
        state["round"] += 1
        state = review(state)
    state = pause(state, prompt="Publish it?", fields=[{"name": "approved", "type": "boolean", "required": True}])
    state["stage"] = "publish"
    state = linger(state)
    state["stage"] = "published"
    state["by"] = "console"
    return state
