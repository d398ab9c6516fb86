"""Every item through ``gate``, all at once: a map of as many slices as items, sent by ``prep``'s layer in one
``SendMessageBatch``, so that one receive may take them all."""

from asya.flows import flow


@flow
def wide(state):
    state = prep(state)
    state["results"] = [gate(x) for x in state["items"]]
    return state


def prep(state):
    """Plain run: the state."""
    return state


def gate(item):
    """Plain run: the item, passed."""
    return {**item, "passed": True}
