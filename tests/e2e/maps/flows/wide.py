"""Every item through ``gate``, all at once: a map of as many slices as items."""

from asya.flows import flow


@flow
def wide(state):
    state["results"] = [gate(x) for x in state["items"]]
    return state


def gate(item):
    """Plain run: the item, passed."""
    return {**item, "passed": True}
