"""Actors of the e2e timeout mesh: ``prepare`` passes the payload on, ``stall`` sleeps far past its 1 s limit."""

from __future__ import annotations

import contextlib
import time
from typing import Any

#: Longer than the flow's deadline: only the layer's interruption ends ``stall`` in time.
STALL_SECONDS = 120.0


def prepare(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "prepared": True}


def stall(payload: dict[str, Any]) -> dict[str, Any]:
    # Short steps: the local mode runs handlers on worker threads, where the interruption lands between bytecodes
    # (a single long time.sleep would only be interrupted when it returns, P-TIME-8).
    end = time.monotonic() + STALL_SECONDS
    while time.monotonic() < end:
        with contextlib.suppress(Exception):  # careless user code: must not stop the interruption
            time.sleep(0.05)
    return payload
