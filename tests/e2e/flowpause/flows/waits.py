# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""Durable waits on the local mesh (P-WAIT-3, P-WAIT-4): `nap` sleeps between two actors, `signaled` waits for an
event that `asya signal` (or POST /signal) delivers, before or after the wait begins."""

from asya.flows import flow, sleep, wait_for


@flow
async def nap(state):
    state = await normalize(state)
    await sleep(2)
    state["slept"] = True
    state = await publish(state)
    return state


@flow
async def signaled(state):
    state = await normalize(state)
    try:
        state = await wait_for(state, event="approved", timeout=600, path="/approved")
    except TimeoutError:
        state["approved"] = False
    state = await publish(state)
    return state
