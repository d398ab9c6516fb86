# ruff: noqa: F821  (the actors are names the mesh resolves; a plain run injects them)
"""A pause inside a branch (the flow state survives x-pause and x-resume), a timeout block and a map over a payload
list (empty lists included)."""

from hypothesis import strategies as st

from asya.flows import flow, pause, timeout


@flow
async def pause_timeout(state):
    state = await draft(state)
    if state["needs_review"]:
        state = await pause(state, prompt="Approve the draft?", fields=[{"name": "approved", "type": "boolean"}])
        if not state.get("approved", False):
            state["status"] = "rejected"
            return state
    async with timeout(60):
        state = await polish(state)
        state["words"] = [await count(w) for w in state["parts"]]
    state["status"] = "published" if state["words"] != [] else "empty"
    state = await publish(state)
    return state


ACTORS = {
    "draft": lambda s: {**s, "draft": True},
    "polish": lambda s: {**s, "polished": True},
    "count": len,
    "publish": lambda s: {**s, "published": s["status"]},
}

RESUME = {"reviewed": True}


def payloads():
    return st.fixed_dictionaries(
        {
            "needs_review": st.booleans(),
            "parts": st.lists(st.text(alphabet="xy", max_size=3), max_size=3),
        },
        optional={"approved": st.booleans()},
    )
