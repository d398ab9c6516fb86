"""Every item through ``counted``, at most two at a time."""

from asya.flows import flow, map


@flow
async def bounded(state):
    state["results"] = await map(counted, state["items"], max_concurrency=2)
    state["done"] = len(state["results"])
    return state


async def counted(item):
    """Plain run: the item, counted."""
    return {**item, "counted": True}
