# ruff: noqa: F821  (the actors are names the mesh resolves; a plain run injects them)
"""try/except: nested tries, a tuple of classes, MRO matching, an error inside an except caught by the outer try, a
break out of a try inside a loop, a fan-out inside a try whose slices fail (the except runs once per task), and
an uncaught error."""

import asyncio

from hypothesis import strategies as st

from asya.flows import flow


class QuotaError(ValueError):
    pass


@flow(max_iterations=5)
async def errors(state):
    state = await load(state)
    try:
        try:
            state = await risky(state)
        except (KeyError, QuotaError):
            state["handled"] = "inner"
            state = await fallback(state)
        state = await after(state)
    except ValueError:
        state["handled"] = "outer"
    state["n"] = 0
    while state["n"] < 3:
        state["n"] += 1
        try:
            state = await step(state)
            if state["n"] == state["stop_at"]:
                break
        except LookupError:
            state["missed"] = state.get("missed", 0) + 1
    try:
        state["parts"] = await asyncio.gather(part(state), part(state), check(state))
    except RuntimeError:
        state["parts"] = "failed"
        state = await repair(state)
    state = await final(state)
    return state


def _risky(s):
    mode = s["mode"]
    if mode == "key":
        raise KeyError("k")
    if mode == "quota":
        raise QuotaError("quota")
    if mode == "value":
        raise ValueError("v")
    if mode == "type":
        raise TypeError("uncaught")
    return {**s, "risky": "ok"}


def _fallback(s):
    if s["fallback_fails"]:
        raise ValueError("fallback failed too")
    return {**s, "fell_back": True}


def _step(s):
    if s["n"] in s["miss"]:
        raise IndexError("miss")
    return {**s, "steps": s.get("steps", 0) + 1}


def _part(s):
    if s["parts_fail"]:
        raise RuntimeError("part failed")
    return s["n"]


ACTORS = {
    "load": lambda s: {**s, "loaded": True},
    "risky": _risky,
    "fallback": _fallback,
    "after": lambda s: {**s, "after": True},
    "step": _step,
    "part": _part,
    "check": lambda s: "checked",
    "repair": lambda s: {**s, "repaired": True},
    "final": lambda s: {**s, "final": True},
}


def payloads():
    return st.fixed_dictionaries(
        {
            "mode": st.sampled_from(["ok", "key", "quota", "value", "type"]),
            "fallback_fails": st.booleans(),
            "stop_at": st.integers(min_value=0, max_value=3),
            "miss": st.lists(st.integers(min_value=1, max_value=3), max_size=2),
            "parts_fail": st.booleans(),
        }
    )
