"""Spreading a fan-out's slices across invocations (P-MAP-3): pure, no I/O.

Records of one batch run one after another (P-PROC-1), so the slices of one fan-out that SQS hands to one invocation
would run in turn, however many invocations the actor may run at once. :func:`spread` picks the records an invocation
hands back before it starts any: of the child slices (``x-asya-fan-in`` with ``slice_index`` 1 or more) of one compiled
flow's fan-out (its ``origin_id`` and ``set``), the first in batch order starts here and every later one is re-sent to
the actor's own queue and acked, so that other invocations receive it. The frames of a fan-in actor (P-FANIN-3, no
``set``) keep their batches: they are often many small items, where a batch saves invocations. Only first deliveries are
handed back (``ApproximateReceiveCount`` 1): a record SQS delivers again runs where it lands, so handing back never
spends a record's receives, which count towards its dead-letter queue (P-ACK-6). A re-sent copy is a new message and may
be handed back again by the invocation that receives it with a sibling; each invocation starts one slice of the fan-out,
so the copies end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asya import headers as hdr
from asya.envelope import Envelope

__all__ = ["spread"]


def spread(records: Sequence[Mapping[str, Any]], envelopes: Mapping[str, Envelope | None]) -> list[str]:
    """The message ids, in batch order, of the records to hand back; ``envelopes`` maps a message id to its parsed
    envelope (``None`` when it did not parse)."""
    started: set[tuple[str, str]] = set()
    out: list[str] = []
    for record in records:
        message_id = str(record.get("messageId", ""))
        key = _fan_out(envelopes.get(message_id))
        if key is None:
            continue
        if key in started and _receives(record) == 1:
            out.append(message_id)
            continue
        started.add(key)
    return out


def _fan_out(envelope: Envelope | None) -> tuple[str, str] | None:
    """``(origin_id, set)`` of a child slice of a compiled flow's fan-out, else ``None``."""
    if envelope is None:
        return None
    header = envelope.headers.get(hdr.FAN_IN)
    if not isinstance(header, Mapping):
        return None
    origin, index, group = header.get("origin_id"), header.get("slice_index"), header.get("set")
    if not isinstance(origin, str) or not isinstance(group, str):
        return None
    if not isinstance(index, int) or isinstance(index, bool) or index < 1:
        return None
    return origin, group


def _receives(record: Mapping[str, Any]) -> int:
    attributes = record.get("attributes")
    raw = attributes.get("ApproximateReceiveCount") if isinstance(attributes, Mapping) else None
    try:
        return int(raw or 1)
    except (TypeError, ValueError):
        return 1
