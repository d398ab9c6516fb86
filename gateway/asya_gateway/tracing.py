"""W3C Trace Context at task creation (P-TRACE-2, GW-CREATE-5).

The gateway continues the caller's trace when the HTTP request carries a valid ``traceparent`` (the value is forwarded
unchanged, with its ``tracestate``: the gateway records no span of its own, as the layer does when tracing is off,
P-TRACE-1); else a valid ``traceparent`` in the body's ``headers``; else it starts a new trace (random trace id and
parent id, sampled flag) and drops any ``tracestate``, which belongs to the trace it came with.

Only valid W3C values are ever forwarded (GW-CREATE-5): an invalid ``traceparent`` is replaced by a new trace, an
invalid ``tracestate`` is dropped. Valid means: ``traceparent`` per W3C (version ``00`` exactly 55 characters; a later
version may append ``-`` fields of visible ASCII, the whole at most :data:`MAX_TRACE_HEADER` characters), and
``tracestate`` a list of at most 32 ``key=value`` members with W3C keys and values, no key twice, at most
:data:`MAX_TRACE_HEADER` characters in all. So neither header can carry a control character or a line break into a
log, nor 20 KB past the 16 KiB header cap.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Final, TypedDict

from asya import headers as hdr

__all__ = [
    "MAX_TRACE_HEADER",
    "CallerTraces",
    "caller_traces",
    "is_valid_traceparent",
    "is_valid_tracestate",
    "new_traceparent",
    "trace_headers",
]

#: The longest ``traceparent`` or ``tracestate`` forwarded (GW-CREATE-5: ``tracestate`` at most 512 characters).
MAX_TRACE_HEADER: Final = 512
_MAX_TRACESTATE_MEMBERS: Final = 32
_TRACEPARENT_RE: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})((?:-[\x21-\x7e]*)*)")
_KEY_CHARS: Final = r"[a-z0-9_\-*/]"
_TRACESTATE_MEMBER_RE: Final = re.compile(
    rf"(?P<key>[a-z]{_KEY_CHARS}{{0,255}}|[a-z0-9]{_KEY_CHARS}{{0,240}}@[a-z]{_KEY_CHARS}{{0,13}})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)


def is_valid_traceparent(value: object) -> bool:
    """A ``traceparent`` per W3C Trace Context: version ``ff`` and all-zero ids are invalid; version ``00`` has exactly
    four fields; later versions may append more."""
    if not isinstance(value, str) or len(value) > MAX_TRACE_HEADER:
        return False
    match = _TRACEPARENT_RE.fullmatch(value)
    if match is None:
        return False
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    return not (version == "00" and rest)


def is_valid_tracestate(value: object) -> bool:
    """A ``tracestate`` per W3C Trace Context (empty list members and optional blanks around commas allowed), at most
    :data:`MAX_TRACE_HEADER` characters and 32 members, no key twice. The empty string is not worth forwarding."""
    if not isinstance(value, str) or not value.strip(" \t") or len(value) > MAX_TRACE_HEADER:
        return False
    keys: set[str] = set()
    for raw in value.split(","):
        member = raw.strip(" \t")
        if not member:
            continue
        match = _TRACESTATE_MEMBER_RE.fullmatch(member)
        if match is None or match["key"] in keys:
            return False
        keys.add(match["key"])
    return 0 < len(keys) <= _MAX_TRACESTATE_MEMBERS


class CallerTraces(TypedDict):
    """The trace headers of the caller's HTTP request, as sent (``trace_headers`` keeps only valid ones)."""

    traceparent: str | None
    tracestate: str | None


def caller_traces(headers: Mapping[str, str]) -> CallerTraces:
    """The ``traceparent``/``tracestate`` of a request's headers, each ``None`` when absent; passed on as keyword
    arguments to what starts or resumes a task."""
    return {"traceparent": headers.get(hdr.TRACEPARENT), "tracestate": headers.get(hdr.TRACESTATE)}


def new_traceparent() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def trace_headers(
    http_traceparent: str | None, http_tracestate: str | None, body_headers: dict[str, object]
) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` headers of a new envelope: the HTTP pair, else the body's pair, each only
    when its ``traceparent`` is valid; the ``tracestate`` of that pair only when valid too."""
    for parent, state in (
        (http_traceparent, http_tracestate),
        (body_headers.get("traceparent"), body_headers.get("tracestate")),
    ):
        if is_valid_traceparent(parent):
            assert isinstance(parent, str)
            out = {"traceparent": parent}
            if is_valid_tracestate(state):
                assert isinstance(state, str)
                out["tracestate"] = state
            return out
    return {"traceparent": new_traceparent()}
