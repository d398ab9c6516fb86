"""The maps ``make bench`` times (bench/maps.py): every item through ``nap``, all at once, then at most 5 at once."""

from asya.flows import flow, map


@flow
def bench_map(state):
    state["naps"] = [nap(x) for x in state["items"]]
    state["bounded"] = map(nap, state["items"], max_concurrency=5)
    return state


def nap(item):
    """Plain run: the item (the mesh's ``nap`` sleeps ``item["sleep_s"]`` first)."""
    return item
