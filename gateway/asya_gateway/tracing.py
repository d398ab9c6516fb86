"""W3C Trace Context at task creation (P-TRACE-2).

The gateway continues the caller's trace when the HTTP request carries a valid ``traceparent`` (the value is forwarded
unchanged, with its ``tracestate``: the gateway records no span of its own, as the layer does when tracing is off,
P-TRACE-1); else a valid ``traceparent`` in the body's ``headers``; else it starts a new trace (random trace id and
parent id, sampled flag) and drops any ``tracestate``, which belongs to the trace it came with.
"""

from __future__ import annotations

import re
import secrets
from typing import Final

__all__ = ["is_valid_traceparent", "new_traceparent", "trace_headers"]

_TRACEPARENT_RE: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def is_valid_traceparent(value: object) -> bool:
    """A ``traceparent`` per W3C Trace Context: version ``ff`` and all-zero ids are invalid; version ``00`` has exactly
    four fields; later versions may append more."""
    if not isinstance(value, str):
        return False
    match = _TRACEPARENT_RE.match(value)
    if match is None:
        return False
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    return not (version == "00" and rest is not None)


def new_traceparent() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def trace_headers(
    http_traceparent: str | None, http_tracestate: str | None, body_headers: dict[str, object]
) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` headers of a new envelope."""
    if is_valid_traceparent(http_traceparent):
        assert http_traceparent is not None
        out = {"traceparent": http_traceparent}
        if http_tracestate:
            out["tracestate"] = http_tracestate
        return out
    body_parent = body_headers.get("traceparent")
    if is_valid_traceparent(body_parent):
        assert isinstance(body_parent, str)
        out = {"traceparent": body_parent}
        body_state = body_headers.get("tracestate")
        if isinstance(body_state, str) and body_state:
            out["tracestate"] = body_state
        return out
    return {"traceparent": new_traceparent()}
