"""Handlers for the batch outbox tests (``test_sidecar_outbox.py``), loaded through ASYA_CODE_DIR (P-ABI-1)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

#: Set by the test when a ``SendMessageBatch`` carrying an earlier record's frames went out.
EARLIER_SENT = threading.Event()
#: How long the slow record waits for that send before giving up (a bound, not a measured duration).
WAIT_BOUND_SECONDS = 60.0


def fan_or_wait(payload: dict[str, Any]) -> Iterator[Any]:
    """``{"text": "a b"}``: one frame per word, at once. ``{"wait": true}``: a slow record that stays in its handler
    until an earlier record's frames were sent, then yields whether that happened while it was still running."""
    if payload.get("wait"):
        yield {"earlier_sent_while_running": EARLIER_SENT.wait(WAIT_BOUND_SECONDS)}
        return
    for index, word in enumerate(str(payload["text"]).split()):
        yield {"chunk": index, "word": word}
