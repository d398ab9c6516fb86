# ruff: noqa: F821  (the actors are names the mesh resolves; a plain run injects them)
"""Branches, mutations, augmented assignments, early return and the expression subset (sync flow)."""

from hypothesis import strategies as st

from asya.flows import flow


@flow
def branches(state):
    state = prepare(state)
    state["total"] = state["a"] + state["b"] * 2
    state["total"] -= 1
    if state["total"] > 10 and "vip" in state["tags"]:
        state["tier"] = "gold"
        state = reward(state)
    elif state.get("mode", "x") == "fast" or len(state["tags"]) == 0:
        state["tier"] = "fast"
        if state["a"] % 2 == 0:
            return state
        state = fast_track(state)
    else:
        state["tier"] = "std" if state["b"] >= 0 else "neg"
        state["meta"] = {"n": len(state["tags"]), "first": state["tags"][0], "both": [state["a"], -state["b"]]}
        state["meta"]["n"] *= 3
        state["ratio"] = state["a"] // (state["b"] if state["b"] != 0 else 1)
    state = finish(state)
    return state


ACTORS = {
    "prepare": lambda s: {**s, "prepared": True},
    "reward": lambda s: {**s, "points": s["total"] * 10},
    "fast-track": lambda s: {**s, "fast": True},
    "finish": lambda s: {**s, "done": True},
}


def payloads():
    return st.fixed_dictionaries(
        {
            "a": st.integers(min_value=-5, max_value=10),
            "b": st.integers(min_value=-3, max_value=6),
            "tags": st.lists(st.sampled_from(["vip", "new", "old"]), max_size=3),
        },
        optional={"mode": st.sampled_from(["fast", "slow"])},
    )
