"""Header names the project reads or writes (docs/protocol.md section 8). Names are matched exactly (P-HDR-2).

Also the two tracking predicates every runtime needs: stealth mode (P-STAT-12) and hook copies (P-STAT-13), and
which headers are the layer's (P-HDR-5): every ``x-asya-`` name except :data:`HANDLER_WRITABLE`, and the trace
headers. Denying the prefix by default covers headers added later without touching this list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "A2A_CONTEXT_ID",
    "A2A_TASK_ID",
    "CHECKPOINTED",
    "DELAY_UNTIL",
    "FAN_IN",
    "FIRST_ATTEMPT",
    "FLOW",
    "GATEWAY_URL",
    "HANDLER_WRITABLE",
    "HISTORY",
    "HISTORY_PREV",
    "HOPS",
    "MESH_STATUS",
    "ORIGIN_ID",
    "PAUSE",
    "PAUSE_EXPIRY",
    "PROGRESS",
    "RESUME_TASK",
    "RESUME_TIMEOUT",
    "ROUTE_OVERRIDE",
    "ROUTE_RESOLVED",
    "SINK_HOOK",
    "TRACEPARENT",
    "TRACESTATE",
    "WAKE",
    "is_hook_copy",
    "is_layer_owned",
    "is_stealth",
]

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
FIRST_ATTEMPT: Final = "x-asya-first-attempt"
DELAY_UNTIL: Final = "x-asya-delay-until"
GATEWAY_URL: Final = "x-asya-gateway-url"
FLOW: Final = "x-asya-flow"
PROGRESS: Final = "x-asya-progress"
A2A_TASK_ID: Final = "x-asya-a2a-task-id"
A2A_CONTEXT_ID: Final = "x-asya-a2a-context-id"
MESH_STATUS: Final = "x-asya-mesh-status"
PAUSE: Final = "x-asya-pause"
RESUME_TASK: Final = "x-asya-resume-task"
#: P-WAIT-2: on x-pause's message to x-resume that ends a pause nobody resumed in time.
PAUSE_EXPIRY: Final = "x-asya-pause-expiry"
#: P-WAIT-3: on a flow's envelope sleeping on its way to x-resume, which runs the rest of the flow when it arrives.
WAKE: Final = "x-asya-wake"
RESUME_TIMEOUT: Final = "x-asya-resume-timeout"
FAN_IN: Final = "x-asya-fan-in"
ORIGIN_ID: Final = "x-asya-origin-id"
ROUTE_OVERRIDE: Final = "x-asya-route-override"
ROUTE_RESOLVED: Final = "x-asya-route-resolved"
SINK_HOOK: Final = "x-asya-sink-hook"
#: (P-HIST-1) the run history is on for this task: the body cut size in bytes, as decimal text (the flow's
#: ``history_body_bytes``); set by the gateway at creation, travels with the envelope and its children.
HISTORY: Final = "x-asya-history"
#: (P-HIST-3) the key of the history object that recorded the hop which sent this envelope.
HISTORY_PREV: Final = "x-asya-history-prev"
#: the number of sends that led to an envelope (P-HOP-1, ``asya.hops``)
HOPS: Final = "x-asya-hops"
#: ``{"key", "line"}`` of the checkpoint x-sink wrote for a failure it forwards to x-sump (P-SINK-5 (e)).
CHECKPOINTED: Final = "x-asya-checkpointed"


#: (P-HDR-5) the ``x-asya-`` headers a handler may write: a route override (P-HDR-2) and a dynamic pause's metadata
#: (x-pause shows it, P-PAUSE-3).
HANDLER_WRITABLE: Final = frozenset({ROUTE_OVERRIDE, PAUSE})
_MESH_PREFIX: Final = "x-asya-"
_LAYER_OWNED_OTHERS: Final = frozenset({TRACEPARENT, TRACESTATE})


def is_layer_owned(name: str) -> bool:
    """A header a handler may not write (P-HDR-5): ``x-asya-*`` outside :data:`HANDLER_WRITABLE`, and the trace
    headers the layer refreshes on every send (P-HDR-3)."""
    if name.startswith(_MESH_PREFIX):
        return name not in HANDLER_WRITABLE
    return name in _LAYER_OWNED_OTHERS


def is_stealth(headers: Mapping[str, Any]) -> bool:
    """``x-asya-mesh-status`` equal to ``off``, case-insensitively (P-STAT-12)."""
    value = headers.get(MESH_STATUS)
    return isinstance(value, str) and value.lower() == "off"


def is_hook_copy(headers: Mapping[str, Any]) -> bool:
    """A copy x-sink sent to a sink hook (P-SINK-6); untracked like stealth envelopes (P-STAT-13)."""
    return SINK_HOOK in headers
