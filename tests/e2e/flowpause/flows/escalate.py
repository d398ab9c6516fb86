# ruff: noqa: F821  (the actors are names of the manifest, resolved by the compiler)
"""Pauses with a timeout (P-WAIT-1): `escalate` catches the TimeoutError, `expire` does not (and its manifest cap
shortens its timeout), `patient` is resumed in time."""

from asya.flows import flow, pause


@flow
def escalate(state):
    state = normalize(state)
    try:
        state = pause(state, prompt="Approve in 2 s?", fields=[{"name": "approved", "type": "boolean"}], timeout=2)
    except TimeoutError:
        state["escalated"] = True
    state = publish(state)
    return state


@flow
def expire(state):
    state = normalize(state)
    state = pause(state, prompt="Approve within the hour?", timeout=3600)  # the manifest's max_pause: 1 caps it
    state = publish(state)
    return state


@flow
def patient(state):
    state = normalize(state)
    try:
        state = pause(state, prompt="Approve?", fields=[{"name": "approved", "type": "boolean"}], timeout=600)
    except TimeoutError:
        state["escalated"] = True
    state = publish(state)
    return state
