"""Replaying one fan-out slice (P-HIST-9): what a retry from a slice's step needs, read from the recorded history.
Pure: no I/O. The gateway (``asya_gateway.routes.history``) turns the plan into envelopes of the new task.

A slice of a fan-in fan-out (header ``x-asya-fan-in``, P-FANIN-3, P-FLOW-8) is never replayed alone: its aggregator
would wait for siblings that never come. The new task replays the whole fan-out with this one slice run again:

- slice 0, the state the fan-out started from: the payload the sending hop sent to the aggregator under the task's
  id (an output of that hop's line). When no actor hop sent it (a fan-out the gateway ran at create, x-resume after a
  pause, or the aggregator right after another fan-in), the state is the ``base`` the slices of a fan-out inside a
  ``try`` carry (P-FLOW-10), else the slice's own input when the fan-out is a list literal or ``gather`` of the state
  (``state_is_input``, decided by the caller from the program), else, for a fan-out the gateway sent at create, the
  state the caller computes again from the task's input (``state_at_create``); otherwise it was not recorded, and the
  retry is refused;
- the chosen slice runs again from the chosen step, with the input and the headers it had;
- every sibling whose result reached the aggregator (an output of its lineage to the aggregator) sends that result
  straight to the aggregator, as its last actor would have: its actor does not run again;
- a sibling that never reached the aggregator (it failed, or was still running) runs again from its first step.

:func:`plan_slice_replay` raises :class:`SliceReplayError` (the gateway's 409) when something it needs was not
recorded whole: slice 0, a sibling's result cut at the history's body size without an offloaded copy, or a sibling
with no recorded step at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from asya import headers as hdr
from asya import naming
from asya.envelope import Route
from asya.exceptions import AsyaError
from asya.flows.interp import STATE_HEADER
from asya.payloads import REFERENCE_KEY

__all__ = ["SliceMember", "SliceReplay", "SliceReplayError", "plan_slice_replay", "slice_header"]

_KEYS: Final = ("origin_id", "slice_count", "aggregation_key")


class SliceReplayError(AsyaError, ValueError):
    """A slice cannot be replayed: something the fan-out needs was not recorded whole."""


@dataclass(frozen=True, slots=True)
class SliceMember:
    """Slice ``index`` of the replayed fan-out: ``route``, ``payload`` (a recorded body, or ``{"__ref__": ...}``) and
    ``headers`` (recorded) of the envelope to send; ``rerun``: its actor runs again (else it is a result sent straight
    to the aggregator)."""

    index: int
    route: Route
    payload: Any
    headers: Mapping[str, Any]
    rerun: bool


@dataclass(frozen=True, slots=True)
class SliceReplay:
    """The fan-out a slice replay sends: ``state`` and ``route`` of slice 0 (the task's own envelope, to
    ``aggregator``), the recorded ``fan_in`` header of the chosen slice, the chosen slice's ``index``, and the
    ``members`` 1..N-1 in order."""

    aggregator: str
    fan_in: Mapping[str, Any]
    index: int
    route: Route
    state: Any
    members: tuple[SliceMember, ...]


def slice_header(step: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The recorded ``x-asya-fan-in`` header of a step, ``None`` when the step is no fan-in slice."""
    value = (step.get("headers") or {}).get(hdr.FAN_IN)
    return value if isinstance(value, Mapping) and isinstance(value.get("slice_index"), int) else None


def plan_slice_replay(
    history: Mapping[str, Any],
    chosen: Mapping[str, Any],
    *,
    state_is_input: Callable[[], bool],
    state_at_create: Callable[[], tuple[bool, Any]] = lambda: (False, None),
) -> SliceReplay:
    """The fan-out that replays ``chosen`` (a step of a slice, see the module docstring). Asked only when no hop
    recorded slice 0: ``state_is_input()`` says whether the fan-out sent the state itself to every slice (a list
    literal or ``gather``, not a map); ``state_at_create()`` is ``(True, state)`` when the caller could compute the
    state of a fan-out the gateway sent at create (the flow's first instructions run again on the task's input)."""
    task_id = str(history.get("id"))
    fan_in = slice_header(chosen)
    if fan_in is None:
        raise SliceReplayError(f"step {chosen.get('envelope_id')} is no fan-in slice")
    if fan_in.get("origin_id") != task_id:
        raise SliceReplayError(
            f"the slice belongs to a fan-out of {fan_in.get('origin_id')}, not of task {task_id}'s own envelope: "
            "retry from the step of its parent that fanned out"
        )
    steps = [s for s in history.get("steps") or [] if isinstance(s, Mapping)]
    lineages = _lineages(steps, fan_in)
    count = int(fan_in.get("slice_count") or 0)
    aggregator = _aggregator(chosen)
    first = lineages[int(fan_in["slice_index"])][0]
    members = tuple(
        _member(index, lineages.get(index, []), aggregator, chosen if index == fan_in["slice_index"] else None)
        for index in range(1, count)
    )
    route = Route(prev=list(_route(first).prev), curr=aggregator, next=_after(_route(first).next, aggregator))
    return SliceReplay(
        aggregator=aggregator,
        fan_in=fan_in,
        index=int(fan_in["slice_index"]),
        route=route,
        state=_state(steps, lineages, (task_id, aggregator), first, (state_is_input, state_at_create)),
        members=members,
    )


def _lineages(steps: list[Mapping[str, Any]], fan_in: Mapping[str, Any]) -> dict[int, list[Mapping[str, Any]]]:
    """The recorded steps of each slice of the fan-out ``fan_in`` belongs to, by slice index, in hop order (the first
    attempt of a hop first)."""
    out: dict[int, list[Mapping[str, Any]]] = {}
    for step in steps:
        header = slice_header(step)
        if header is None or any(header.get(k) != fan_in.get(k) for k in (*_KEYS, "set")):
            continue
        out.setdefault(int(header["slice_index"]), []).append(step)
    for lineage in out.values():
        lineage.sort(key=lambda s: (int(s.get("hop") or 0), int(s.get("attempt") or 1), str(s.get("started_at"))))
    return out


def _aggregator(step: Mapping[str, Any]) -> str:
    route = _route(step)
    for name in [route.curr, *route.next]:
        if naming.is_aggregator(name):
            return name
    raise SliceReplayError(f"step {step.get('envelope_id')}: no aggregator in its route {route.to_dict()}")


def _member(
    index: int, lineage: list[Mapping[str, Any]], aggregator: str, chosen: Mapping[str, Any] | None
) -> SliceMember:
    if chosen is not None:
        return _rerun(index, chosen)
    for step in lineage:
        for output in step.get("outputs") or []:
            if output.get("actor") == aggregator and output.get("envelope_id") == step.get("envelope_id"):
                route = _route(step)
                arrived = Route(prev=[*route.prev, route.curr], curr=aggregator, next=_after(route.next, aggregator))
                payload = _body(output, "payload", "cut", "ref", f"slice {index}'s result")
                return SliceMember(index, arrived, payload, dict(step.get("headers") or {}), rerun=False)
    if not lineage:
        raise SliceReplayError(
            f"slice {index} of the fan-out left no recorded step (it never ran, or its history object is missing): "
            "retry from the hop that fanned out"
        )
    return _rerun(index, lineage[0])


def _rerun(index: int, step: Mapping[str, Any]) -> SliceMember:
    payload = _body(step, "input", "input_cut", "input_ref", f"slice {index}'s input")
    return SliceMember(index, _route(step), payload, dict(step.get("headers") or {}), rerun=True)


def _state(
    steps: list[Mapping[str, Any]],
    lineages: Mapping[int, list[Mapping[str, Any]]],
    sent_as: tuple[str, str],
    first: Mapping[str, Any],
    fallbacks: tuple[Callable[[], bool], Callable[[], tuple[bool, Any]]],
) -> Any:
    task_id, aggregator = sent_as  # slice 0 left the sending hop under the task's id, to the aggregator
    children = {str(s.get("envelope_id")) for lineage in lineages.values() for s in lineage}
    for step in steps:
        outputs = step.get("outputs") or []
        if step.get("envelope_id") in children or not any(o.get("envelope_id") in children for o in outputs):
            continue
        for output in outputs:
            if output.get("envelope_id") == task_id and output.get("actor") == aggregator:
                return _body(output, "payload", "cut", "ref", "the state at the fan-out")
    flow_state = (first.get("headers") or {}).get(STATE_HEADER)
    if isinstance(flow_state, Mapping) and "base" in flow_state:  # a fan-out inside a try carries it (P-FLOW-10)
        return flow_state["base"]
    state_is_input, state_at_create = fallbacks
    if state_is_input():
        return _body(first, "input", "input_cut", "input_ref", "the state at the fan-out")
    computed, state = state_at_create()
    if computed:
        return state
    raise SliceReplayError(
        "the state the map started from was not recorded (no actor hop sent it: the map ran after a pause, right after "
        "another fan-in, or at the create of a task whose program is no longer deployed): retry the whole task, or "
        "from a step before the map"
    )


def _body(line: Mapping[str, Any], body: str, cut: str, ref: str, what: str) -> Any:
    if isinstance(line.get(ref), str):
        return {REFERENCE_KEY: line[ref]}
    if line.get(cut) is True:
        raise SliceReplayError(
            f"{what} was cut at the flow's history_body_bytes and no whole copy was stored (only offloaded payloads "
            "are): raise history_body_bytes to replay it"
        )
    return line.get(body)


def _route(step: Mapping[str, Any]) -> Route:
    raw = step.get("route") or {}
    return Route(
        list(raw.get("prev") or []), str(raw.get("curr") or step.get("actor") or ""), list(raw.get("next") or [])
    )


def _after(names: list[str], aggregator: str) -> list[str]:
    return names[names.index(aggregator) + 1 :] if aggregator in names else []
