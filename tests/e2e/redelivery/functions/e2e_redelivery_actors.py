"""Actors of the e2e redelivery mesh.

``linger``: the first call for a text waits until SQS has handed the message out again (its queue's visibility
timeout is lowered to 1 s; the test sets :data:`redelivered` to read that off the poller's count), 8 s at most, under
the 10 s actor timeout, unless a second delivery of the same message reaches the handler first, which the hop claim
must prevent (P-ACK-8); every other call returns at once. ``tally`` counts its calls per text: more than one means a
duplicate got past ``linger``'s layer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

#: Set by the test: whether SQS has delivered ``linger``'s message a second time.
redelivered: Callable[[], bool] | None = None
_WAIT_SECONDS: Final = 8.0
_lock = threading.Lock()
_second_call: dict[str, threading.Event] = {}
LINGER_CALLS: dict[str, int] = {}
TALLY_CALLS: dict[str, int] = {}


def linger(payload: dict[str, Any]) -> dict[str, Any]:
    text = str(payload["text"])
    with _lock:
        LINGER_CALLS[text] = calls = LINGER_CALLS.get(text, 0) + 1
        arrived = _second_call.setdefault(text, threading.Event())
    if calls == 1:  # still running when the visibility timeout expires, until the duplicate was delivered
        until = time.monotonic() + _WAIT_SECONDS
        while not arrived.wait(0.05) and not (redelivered is not None and redelivered()):
            if time.monotonic() > until:
                break
    else:
        arrived.set()
    return {**payload, "lingered": True}


def tally(payload: dict[str, Any]) -> dict[str, Any]:
    text = str(payload["text"])
    with _lock:
        TALLY_CALLS[text] = calls = TALLY_CALLS.get(text, 0) + 1
    return {**payload, "tallied": calls}
