"""A retry from a fan-out slice's step (P-HIST-9, GW-HIST-2): the envelopes of the new task, from the plan
``asya.historyslices`` reads out of the run history.

The new task re-sends the whole fan-out under its own id, as a create that starts at a fan-out does (P-FLOW-30): the
members first (the chosen slice, and any sibling that never reached the aggregator, to their actor with their recorded
input; every other sibling's recorded result straight to the aggregator), then slice 0, the task's own envelope with
the state, to the aggregator last. Every slice's ``x-asya-fan-in`` names the new task as its origin and, for a
compiled flow, a set of its own (``{new id}/{hop}``); every flow state is rebound to the new task as a replay from a
step is (P-HIST-8), a slice inside a ``try`` keeping its ``base``. The aggregator then merges and the flow goes on
exactly as it went on after the original fan-out. Child ids derive from the new task id, the hop and the index
(P-FAN-2), so no fence of the old task's children is shared.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from asya import headers as hdr
from asya import routing
from asya.envelope import Envelope, Status
from asya.flows import STATE_HEADER, FlowError, FlowState
from asya.historyslices import SliceReplay
from asya_gateway.errors import HttpError

__all__ = ["own_headers", "replay_sends"]


def own_headers(plan: SliceReplay, recorded: Mapping[str, Any], new_id: str) -> dict[str, Any]:
    """The recorded headers of the chosen slice made slice 0's of the new task: its ``x-asya-fan-in`` at index 0, and
    its flow state without the slices' ``base`` (``asya_gateway.creation`` rebinds the rest to the new task)."""
    headers = dict(recorded)
    headers[hdr.FAN_IN] = _fan_in(plan.fan_in, new_id, 0)
    state = headers.get(STATE_HEADER)
    if isinstance(state, Mapping):
        headers[STATE_HEADER] = {k: v for k, v in state.items() if k != "base"}
    return headers


def replay_sends(
    plan: SliceReplay, payloads: Sequence[Any], *, fresh: Collection[str]
) -> Callable[[Envelope], list[routing.Outgoing]]:
    """What the new task sends, given its own envelope (slice 0, built by ``start_task``): one envelope per member,
    ``payloads`` their bodies in the new task's folder, headers ``fresh`` of the recorded ones left out."""

    def sends(own: Envelope) -> list[routing.Outgoing]:
        status = own.status or Status()
        out: list[routing.Outgoing] = []
        for member, payload in zip(plan.members, payloads, strict=True):
            headers = {**own.headers, **{k: v for k, v in member.headers.items() if k not in fresh}}
            headers[hdr.FAN_IN] = _fan_in(plan.fan_in, own.id, member.index)
            if STATE_HEADER in member.headers:
                headers[STATE_HEADER] = _rebound(member.headers[STATE_HEADER], own.id, status.deadline_at)
            child = Envelope(
                id=routing.child_id(own, member.index),
                parent_id=own.id,
                route=member.route,
                payload=payload,
                headers=headers,
                status=Status(
                    phase="pending",
                    actor=member.route.curr,
                    attempt=1,
                    max_attempts=1,
                    created_at=status.created_at,
                    updated_at=status.updated_at,
                    deadline_at=status.deadline_at,
                ),
            )
            out.append(routing.Outgoing(actor=member.route.curr, envelope=child))
        out.append(routing.Outgoing(actor=own.route.curr, envelope=own))
        return out

    return sends


def _fan_in(recorded: Mapping[str, Any], new_id: str, index: int) -> dict[str, Any]:
    header = {**recorded, "origin_id": new_id, "slice_index": index}
    old_set = recorded.get("set")
    if isinstance(old_set, str) and "/" in old_set:
        header["set"] = f"{new_id}/{old_set.rsplit('/', 1)[1]}"
    return header


def _rebound(raw: object, new_id: str, deadline_at: str | None) -> dict[str, Any]:
    try:
        return FlowState.from_header(raw).replayed(new_id, deadline_at).to_header()
    except FlowError as exc:
        raise HttpError(409, f"a slice's flow state cannot be replayed: {exc}") from None
