"""Actors of the e2e redelivery mesh.

``linger``: the first call for a text waits 3 s (three times its queue's lowered visibility timeout, so SQS hands the
message out again meanwhile) unless a second delivery of the same message reaches the handler first, which the hop
claim must prevent (P-ACK-8); every other call returns at once. ``tally`` counts its calls per text: more than one
means a duplicate got past ``linger``'s layer.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_second_call: dict[str, threading.Event] = {}
LINGER_CALLS: dict[str, int] = {}
TALLY_CALLS: dict[str, int] = {}


def linger(payload: dict[str, Any]) -> dict[str, Any]:
    text = str(payload["text"])
    with _lock:
        LINGER_CALLS[text] = calls = LINGER_CALLS.get(text, 0) + 1
        arrived = _second_call.setdefault(text, threading.Event())
    if calls == 1:
        arrived.wait(3)  # still running when the visibility timeout expires
    else:
        arrived.set()
    return {**payload, "lingered": True}


def tally(payload: dict[str, Any]) -> dict[str, Any]:
    text = str(payload["text"])
    with _lock:
        TALLY_CALLS[text] = calls = TALLY_CALLS.get(text, 0) + 1
    return {**payload, "tallied": calls}
