# ruff: noqa: F821  (the actors are names the mesh resolves; a plain run injects them)
"""while True with break and continue, a nested loop, and a map fan-out inside a loop (a fresh set per iteration)."""

from hypothesis import strategies as st

from asya.flows import flow


@flow(max_iterations=20)
def loops(state):
    state = start(state)
    state["i"] = 0
    state["log"] = []
    while True:
        state["i"] += 1
        if state["i"] > state["limit"]:
            break
        if state["i"] % 2 == 0:
            state = even(state)
            continue
        state["j"] = 0
        while state["j"] < state["inner"]:
            state["j"] += 1
            state = tick(state)
        state["batch"] = [square(x) for x in state["items"]]
        state["log"] = state["log"] + [state["batch"]]
    state = done(state)
    return state


ACTORS = {
    "start": lambda s: {**s, "started": True},
    "even": lambda s: {**s, "evens": s.get("evens", 0) + 1},
    "tick": lambda s: {**s, "ticks": s.get("ticks", 0) + s["j"]},
    "square": lambda x: x * x,
    "done": lambda s: {**s, "finished": s["i"]},
}


def payloads():
    return st.fixed_dictionaries(
        {
            "limit": st.integers(min_value=0, max_value=5),
            "inner": st.integers(min_value=0, max_value=2),
            "items": st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
        }
    )
