"""The merge of a complete fan-in set (P-AGG-5, P-AGG-6): pure functions, no I/O.

:func:`merge_payload` sets the value at the aggregation key (an RFC 6901 pointer) of slice 0's payload, which must be
a JSON object, to the list of the other slices' payloads in numeric slice order, creating missing intermediate
objects and replacing an existing value; anything else is a :class:`MergeError` (P-AGG-9). :func:`merged_envelope`
gives the result the task's identity: ``id = origin_id``, slice 0's ``parent_id``, ``route = {prev: slice0.prev +
[aggregator], curr: C[0], next: C[1:]}`` (x-sink with ``Completed`` when ``C`` is empty), slice 0's headers with
``x-asya-origin-id``, ``created_at`` and ``deadline_at``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from asya import headers as hdr
from asya import naming
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.exceptions import AsyaError

__all__ = ["MergeError", "merge_payload", "merged_envelope", "merged_identity"]


class MergeError(AsyaError, ValueError):
    """P-AGG-9: the slices cannot be merged (slice 0 not an object, a pointer through a non-object)."""


def _tokens(pointer: str) -> list[str]:
    if not pointer.startswith("/"):
        raise MergeError(f"aggregation_key: {pointer!r} is not a JSON Pointer starting with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def merge_payload(parent: Any, key: str, payloads: Sequence[Any]) -> dict[str, Any]:
    """Slice 0's payload (copied) with ``payloads`` at ``key`` (P-AGG-5)."""
    if not isinstance(parent, dict):
        raise MergeError(f"fan-in slice 0 payload must be a JSON object, got {type(parent).__name__}")
    merged: dict[str, Any] = copy.deepcopy(parent)
    target: Any = merged
    tokens = _tokens(key)
    for depth, token in enumerate(tokens[:-1]):
        nxt = target.setdefault(token, {})
        if not isinstance(nxt, dict):
            where = "/" + "/".join(tokens[: depth + 1])
            raise MergeError(f"aggregation_key {key!r} goes through {where!r}, which is a {type(nxt).__name__}")
        target = nxt
    target[tokens[-1]] = list(payloads)
    return merged


def merged_identity(origin_id: str, parent: Mapping[str, Any], *, aggregator: str, now: str) -> tuple[Envelope, str]:
    """The merged envelope without its payload and its destination (P-AGG-6): ``(envelope, actor)``."""
    route = parent.get("route") if isinstance(parent.get("route"), dict) else {}
    assert isinstance(route, dict)
    prev = [str(a) for a in route.get("prev", [])] + [aggregator]
    rest = [str(a) for a in route.get("next", [])]
    headers = {k: v for k, v in dict(parent.get("headers") or {}).items() if k != hdr.FAN_IN}
    headers[hdr.ORIGIN_ID] = origin_id
    created_at, deadline_at = parent.get("created_at"), parent.get("deadline_at")
    if rest:
        actor = rest[0]
        status = Status(
            phase=Phase.PENDING.value, actor=actor, created_at=created_at, updated_at=now, deadline_at=deadline_at
        )
        out_route = Route(prev=prev, curr=actor, next=rest[1:])
    else:
        actor = naming.SINK
        status = Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor=aggregator,
            created_at=created_at,
            updated_at=now,
            deadline_at=deadline_at,
        )
        out_route = Route(prev=prev, curr="", next=[])
    parent_id = parent.get("parent_id")
    envelope = Envelope(
        id=origin_id,
        route=out_route,
        payload=None,
        parent_id=parent_id if isinstance(parent_id, str) and parent_id else None,
        headers=headers,
        status=status,
    )
    return envelope, actor


def merged_envelope(
    origin_id: str,
    parent: Mapping[str, Any],
    parent_payload: Any,
    key: str,
    payloads: Sequence[Any],
    *,
    aggregator: str,
    now: str,
) -> tuple[Envelope, str]:
    """The merged envelope and the actor it goes to (P-AGG-5, P-AGG-6); raises :class:`MergeError`."""
    envelope, actor = merged_identity(origin_id, parent, aggregator=aggregator, now=now)
    envelope.payload = merge_payload(parent_payload, key, payloads)
    return envelope, actor
