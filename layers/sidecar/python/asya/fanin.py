"""Slicing the output of a fan-in actor (P-FANIN-2..4): pure functions, no I/O, no clock.

A fan-in actor (``fan_in`` in the manifest, ``ASYA_FAN_IN`` in its environment) has all its frames held until the
handler returns (P-FANIN-2, ``asya.handlercall``); then :func:`slices` turns the call into ``N + 1`` slices, each with
header ``x-asya-fan-in = {"origin_id", "slice_index", "slice_count", "aggregation_key"}`` (P-FANIN-3):

- slice 0, the parent: the input's ``id`` and ``parent_id``, the input payload as received (a ``__ref__`` stays a
  reference), the ABI headers at the end of the call, and ``route = {prev: prev_in + [actor], curr: <aggregator>,
  next: C}`` with ``C`` the part of the final ABI ``route.next`` after its first occurrence of the aggregator; it goes
  straight to the aggregator's queue (no route override applies to crew, P-ROUTE-7);
- slice ``i`` (1..N): frame ``i - 1`` routed as any frame (P-ROUTE-2/3), with the deterministic child id of
  ``(input id, h, i)`` (``routing.child_id``, as P-FAN-2) and ``parent_id`` = the input id.

Slice 0 keeps the input id, so the batch's outbox holds it until every other slice left (P-ROUTE-9). An aggregator
missing from the final ``route.next`` is the handler error :class:`FanInRouteError` (a ``ValueError``, P-FANIN-4):
nothing is sent and the retry policy applies (P-FANIN-2). So is a call of more than ``MAX_SLICES - 1`` frames (P-AGG-3's
limit, named in the message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from asya import headers as hdr
from asya import routing
from asya.envelope import Envelope, Phase, Route, Status

__all__ = ["MAX_SLICES", "FanInRouteError", "fan_in_header", "slices"]

#: The most slices one fan-in call may send (P-AGG-3, chosen): the aggregator counts up to this many at O(1) each.
MAX_SLICES: Final = 10_000


class FanInRouteError(ValueError):
    """P-FANIN-4: the fan-in actor's aggregator is not in the final ``route.next``, or the call yielded more than
    ``MAX_SLICES - 1`` frames (P-AGG-3)."""


def fan_in_header(origin_id: str, index: int, count: int, key: str) -> dict[str, Any]:
    """The ``x-asya-fan-in`` value of slice ``index`` of ``count`` (P-FANIN-3)."""
    return {"origin_id": origin_id, "slice_index": index, "slice_count": count, "aggregation_key": key}


def slices(
    entry: Envelope,
    frames: Sequence[routing.FrameLike],
    *,
    actor: str,
    aggregator: str,
    key: str,
    final_next: Sequence[str],
    final_headers: Mapping[str, Any],
    final_deadline_at: str | None,
    payload: Any,
    now: str,
    trace: routing.Trace,
) -> list[routing.Outgoing]:
    """The ``N + 1`` slices of one fan-in call, children first and slice 0 last. ``entry`` is the entry-updated input,
    ``final_*`` the ABI state at the end of the call, ``payload`` the input payload as received."""
    try:
        position = list(final_next).index(aggregator)
    except ValueError:
        raise FanInRouteError(f"fan_in aggregator '{aggregator}' is not in route.next") from None
    count = len(frames) + 1
    if count > MAX_SLICES:
        raise FanInRouteError(f"fan_in: {count} slices exceed the limit of {MAX_SLICES} slices per call")
    out: list[routing.Outgoing] = []
    for index, frame in enumerate(frames, start=1):
        outgoing = routing.forward_frame(entry, frame, index, actor=actor, now=now, trace=trace)
        outgoing.envelope.headers[hdr.FAN_IN] = fan_in_header(entry.id, index, count, key)
        out.append(outgoing)
    headers = trace.headers(final_headers)
    headers[hdr.FAN_IN] = fan_in_header(entry.id, 0, count, key)
    status_in = entry.status or Status()
    parent = Envelope(
        id=entry.id,
        parent_id=entry.parent_id,
        route=Route(prev=[*entry.route.prev, actor], curr=aggregator, next=list(final_next[position + 1 :])),
        payload=payload,
        headers=headers,
        status=Status(
            phase=Phase.PENDING.value,
            actor=aggregator,
            created_at=status_in.created_at,
            updated_at=now,
            deadline_at=final_deadline_at,
        ),
    )
    out.append(routing.Outgoing(actor=aggregator, envelope=parent))
    return out
