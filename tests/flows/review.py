# ruff: noqa: F821  (the actors are names the mesh resolves; a plain run injects them)
"""The issue's example: a branch, a 3-way fan-out, a bounded loop and a try/except around a flaky actor."""

import asyncio

from hypothesis import strategies as st

from asya.flows import flow


@flow(max_iterations=10)
async def review(state: dict) -> dict:
    state = await classify(state)
    if state["category"] == "urgent":
        state = await escalate(state)
    else:
        state["queue"] = "standard"
        state = await standard_review(state)
    state["reviews"] = await asyncio.gather(grammar(state), facts(state), tone(state))
    while state["score"] < 0.8 and state["round"] < 3:
        state["round"] += 1
        state = await revise(state)
    try:
        state = await publish(state)
    except ConnectionError:
        state = await queue_for_later(state)
    return state


def _classify(s):
    return {**s, "category": "urgent" if "!" in s["text"] else "normal", "round": 0}


def _publish(s):
    if s.get("flaky"):
        raise ConnectionRefusedError("broker down")
    return {**s, "published": True}


ACTORS = {
    "classify": _classify,
    "escalate": lambda s: {**s, "escalated": True},
    "standard-review": lambda s: {**s, "reviewed": s["queue"]},
    "grammar": lambda s: len(s["text"]),
    "facts": lambda s: s["text"].count("a"),
    "tone": lambda s: {"tone": "loud" if s["category"] == "urgent" else "calm"},
    "revise": lambda s: {**s, "score": s["score"] + s["step"]},
    "publish": _publish,
    "queue-for-later": lambda s: {**s, "queued": True},
}


def payloads():
    return st.fixed_dictionaries(
        {
            "text": st.text(alphabet="ab! ", max_size=12),
            "score": st.floats(min_value=0, max_value=1, allow_nan=False),
            "step": st.sampled_from([0.0, 0.1, 0.5]),
            "flaky": st.booleans(),
        }
    )
