"""The per-task hop ceiling (P-HOP-1, docs/protocol.md section 8).

Header ``x-asya-hops`` counts the sends that led to an envelope: absent on what the gateway creates (0), and every
send of the layer carries the input's count plus one (``asya.routing.Trace``), whatever a handler wrote (P-HDR-3):
forwarded frames, fan-out children (they inherit their parent's count), retries, x-sink and x-sump. An envelope that
arrives at a user actor with a count at or over the ceiling (``ASYA_MAX_HOPS``, the manifest's ``max_hops``, default
:data:`DEFAULT_MAX_HOPS`) is not handled: the task fails through x-sump with reason ``HopCeiling`` and the message of
:func:`ceiling_message`. A count that is not a non-negative integer counts as 0, as if absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from asya import headers as hdr

__all__ = ["DEFAULT_MAX_HOPS", "ceiling_message", "hop_count", "over_ceiling"]

#: The default hop ceiling (chosen): at a few hops a second a runaway loop stops within minutes.
DEFAULT_MAX_HOPS: Final = 1000


def hop_count(headers: Mapping[str, Any]) -> int:
    """The ``x-asya-hops`` of ``headers``; 0 when absent or not a non-negative integer."""
    value = headers.get(hdr.HOPS)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def over_ceiling(headers: Mapping[str, Any], ceiling: int) -> bool:
    """Whether an envelope with ``headers`` has reached the hop ceiling."""
    return hop_count(headers) >= ceiling


def ceiling_message(ceiling: int) -> str:
    """The error message of a task stopped by the ceiling."""
    return f"hop ceiling {ceiling} reached"
