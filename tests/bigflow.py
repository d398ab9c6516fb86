"""A flow written as Python whose compiled program is well over Lambda's 4 KB environment (issue 29: programs ship
as a file, ``asya.flowfile``), for the unit, infra and functional tiers."""

from __future__ import annotations


def big_flow_source(*, first: str = "a", last: str = "b", mutations: int = 80) -> str:
    """``def big(state)``: ``first``, then ``mutations`` payload mutations (``k0`` .. ``k{n-1}``), then ``last``."""
    sets = "".join(f'    state["k{i}"] = {i} + len(state.get("items", []))\n' for i in range(mutations))
    return f"def big(state):\n    state = {first}(state)\n{sets}    state = {last}(state)\n    return state\n"
