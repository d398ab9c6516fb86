"""The actor of the poison mesh: ``fragile`` crashes the whole invocation until the file named by the payload's
``fixed_flag`` exists, then returns its payload marked as handled."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def fragile(payload: dict[str, Any]) -> dict[str, Any]:
    if not Path(payload["fixed_flag"]).exists():
        # A BaseException that is not an Exception: the layer does not catch it, so the invocation crashes and
        # there is no batch response (P-ABI-11, P-ACK-5), like a segfault or an out-of-memory kill.
        raise SystemExit("fragile: broken until fixed")
    return {**payload, "handled": True}
