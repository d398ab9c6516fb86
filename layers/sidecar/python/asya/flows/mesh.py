"""Continuations applied to envelopes (P-FLOW-3..10): the one place where the layer, the gateway, the aggregator and
x-resume turn a flow's :class:`~asya.flows.interp.Step` into envelopes. Pure: no I/O; ``now`` is passed in.

- :func:`continue_outgoing`: an outgoing envelope that ends its route (x-sink, ``Completed``, ``route.curr == ""``)
  and carries ``x-asya-flow-state`` is replaced by what the flow does next: the next route segment, the fan-out
  slices (P-FLOW-8), a pause, or the same x-sink envelope with the flow's final state. Any other envelope passes.
- :func:`start` builds the first envelope(s) of a created task (P-FLOW-5).
- :func:`release`: the children a bounded fan-out's aggregator starts as earlier ones finish (P-MAP-2).
- :func:`on_failure`: a final handler failure of a flow envelope inside a ``try`` becomes the ``except`` clause's
  continuation (P-FLOW-9, P-FLOW-10); ``None`` when nothing catches it.
- :func:`on_pause_timeout`: a pause that nobody resumed in time raises ``TimeoutError`` at the pause (P-WAIT-2):
  the ``except TimeoutError`` clause's continuation, else the task fails with reason ``Timeout``.

A :class:`~asya.flows.errors.FlowError` (an expression, a loop guard, a second frame, an unknown flow) becomes a
failure envelope to x-sink under the flow's owner id: phase ``failed``, reason ``RuntimeError`` (P-FLOW-13). So does
any other exception the interpreter raises (``RecursionError`` on a deep copy, ``MemoryError``, a bug), as a
``FlowError`` naming it: a continuation never fails the record, which would run the handler before it again
(P-FLOW-20).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from asya import headers as hdr
from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.fanin import fan_in_header
from asya.flows.errors import FlowError
from asya.flows.interp import STATE_HEADER, FlowState, Step, advance, dispatch, fanout_slices
from asya.flows.ir import Program, aggregator_name
from asya.flows.versions import FlowVersionMissingError, resolve
from asya.timeutil import format_ts, parse_ts

__all__ = [
    "TIMEOUT_ERROR",
    "continue_outgoing",
    "flow_failure",
    "is_flow_end",
    "on_failure",
    "on_pause_timeout",
    "pause_timeout_error",
    "release",
    "start",
]

#: How a ``HandlerTimeout`` is matched by ``except`` clauses (P-FLOW-9): Python's ``TimeoutError``.
TIMEOUT_ERROR: Final = {"type": "TimeoutError", "mro": ["OSError", "Exception"]}
_SLICE_NAMESPACE: Final = uuid.UUID("0b7f6a51-4c1e-5d2a-8e3b-9f4a2c6d1e70")
_CATCHABLE: Final = frozenset({Reason.POLICY_EXHAUSTED.value, Reason.RUNTIME_ERROR.value, Reason.HANDLER_TIMEOUT.value})

Programs = Mapping[str, Program]


def _now(now: str) -> datetime:
    moment = parse_ts(now)
    if moment is None:
        raise ValueError(f"now must be an RFC 3339 timestamp, got {now!r}")
    return moment


def is_flow_end(outgoing: routing.Outgoing) -> bool:
    """The envelope ends its route (P-ROUTE-4) while a compiled flow is in progress (P-FLOW-3)."""
    env = outgoing.envelope
    return (
        outgoing.actor == naming.SINK
        and STATE_HEADER in env.headers
        and env.route.curr == ""
        and env.status is not None
        and env.status.reason == Reason.COMPLETED.value
    )


def start(program: Program, envelope: Envelope, *, now: str) -> list[routing.Outgoing]:
    """The envelope(s) that start ``program`` for a created task (P-FLOW-5); ``envelope`` is the gateway's envelope
    whose route is replaced."""
    headers = dict(envelope.headers)
    headers[STATE_HEADER] = FlowState(flow=program.flow, pc=0, owner=envelope.id, digest=program.digest).to_header()
    status = envelope.status or Status()
    begun = Envelope(
        id=envelope.id,
        parent_id=envelope.parent_id,
        route=Route(prev=[], curr="", next=[]),
        payload=envelope.payload,
        headers=headers,
        status=Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor="",
            created_at=status.created_at,
            updated_at=now,
            deadline_at=status.deadline_at,
        ),
    )
    return continue_outgoing({program.flow: program}, routing.Outgoing(actor=naming.SINK, envelope=begun), now=now)


def continue_outgoing(programs: Programs, outgoing: routing.Outgoing, *, now: str) -> list[routing.Outgoing]:
    """P-FLOW-3: what a flow does where ``outgoing`` ends its route; ``[outgoing]`` unchanged when it does not."""
    if not is_flow_end(outgoing):
        return [outgoing]
    env = outgoing.envelope
    try:
        state = FlowState.from_header(env.headers[STATE_HEADER])
        if state.owner and env.id != state.owner:
            raise FlowError(
                f"actor '{(env.status.actor if env.status else None) or '?'}' returned more than one payload in flow "
                f"'{state.flow}'"
            )
        program = resolve(programs, state)
        step = advance(program, env.payload, state, deadline_at=_deadline(env), now=_now(now))
        return _emit(env, step, program, now=now, error=None)
    except Exception as exc:  # every continuation error fails the task, never the record (P-FLOW-20)
        return [_failed(env, _flow_error(exc), now=now)]


def on_failure(
    programs: Programs, failure: routing.Outgoing, *, original_payload: Any, now: str
) -> list[routing.Outgoing] | None:
    """P-FLOW-9/10: the ``except`` continuation for the final failure ``failure`` (x-sink or x-sump, phase ``failed``)
    of a call whose input payload was ``original_payload``; ``None`` when no clause catches it."""
    env = failure.envelope
    status = env.status
    raw = env.headers.get(STATE_HEADER)
    if raw is None or status is None or status.reason not in _CATCHABLE or status.error is None:
        return None
    try:
        state = FlowState.from_header(raw)
        program = resolve(programs, state)
    except FlowVersionMissingError as exc:  # its except clauses are unknown: the task fails as it would anywhere
        return [_failed(env, exc, now=now)]
    except FlowError:
        return None
    error = TIMEOUT_ERROR if status.reason == Reason.HANDLER_TIMEOUT.value else status.error
    try:
        caught = dispatch(program, state, error, deadline_at=status.deadline_at)
    except Exception as exc:  # as in continue_outgoing (P-FLOW-20)
        return [_failed(env, _flow_error(exc), now=now)]
    if caught is None:
        return None
    resumed, deadline_at = caught
    if state.has_base:  # a fan-out slice: resume under the merged envelope's identity (P-FLOW-10)
        env_id, parent_id, payload = state.owner, None, state.base
        prev = [*env.route.prev, aggregator_name(state.flow)]
    else:
        env_id, parent_id, payload = env.id, env.parent_id, original_payload
        prev = [*env.route.prev, env.route.curr]
    headers = dict(env.headers)
    headers.pop(hdr.FAN_IN, None)
    headers[STATE_HEADER] = resumed.to_header()
    caught_env = Envelope(
        id=env_id,
        parent_id=parent_id,
        route=Route(prev=prev, curr="", next=[]),
        payload=payload,
        headers=headers,
        status=Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor=status.actor,
            created_at=status.created_at,
            updated_at=now,
            deadline_at=deadline_at,
        ),
    )
    try:
        step = advance(program, payload, resumed, deadline_at=deadline_at, now=_now(now))
        out = _emit(caught_env, step, program, now=now, error=dict(status.error))
    except Exception as exc:  # as in continue_outgoing (P-FLOW-20)
        return [_failed(caught_env, _flow_error(exc), now=now)]
    for item in out:
        # whatever the clause does next (a call, the end, a fan-out, a pause), the task's own envelope carries the
        # caught error, so the run histories show the failed call as failed, not as a success
        if item.envelope.id == env_id and item.envelope.status is not None and item.envelope.status.error is None:
            item.envelope.status.error = dict(status.error)
    return out


def pause_timeout_error(seconds: int) -> dict[str, Any]:
    """The error of a pause nobody resumed within ``seconds`` (P-WAIT-2): Python's ``TimeoutError``."""
    return {**TIMEOUT_ERROR, "message": f"pause timed out after {seconds} s: nobody resumed the task"}


def on_pause_timeout(
    programs: Programs, paused: Envelope, *, seconds: int, now: str, deadline_at: str | None
) -> list[routing.Outgoing]:
    """P-WAIT-2: what a task does when its pause expires. ``paused`` is the envelope x-resume restores from the
    paused file (id, ``route.prev`` ending with x-pause, the stored headers and payload). Inside a ``try`` whose
    clause matches ``TimeoutError`` the flow goes on there with the state at the pause; otherwise (no clause, no
    compiled flow) the task fails with reason ``Timeout`` and the error names the pause."""
    details = pause_timeout_error(seconds)
    status_in = paused.status or Status()
    failed = Envelope(
        id=paused.id,
        parent_id=paused.parent_id,
        route=Route(prev=list(paused.route.prev), curr=naming.RESUME, next=[]),
        payload=paused.payload,
        headers=dict(paused.headers),
        status=Status(
            phase=Phase.FAILED.value,
            reason=Reason.RUNTIME_ERROR.value,
            actor=naming.RESUME,
            created_at=status_in.created_at,
            updated_at=now,
            deadline_at=deadline_at,
            error=details,
        ),
    )
    caught = on_failure(programs, routing.Outgoing(naming.SINK, failed), original_payload=paused.payload, now=now)
    if caught is not None:
        return caught
    assert failed.status is not None
    failed.status.reason = Reason.TIMEOUT.value
    failed.payload = routing.error_payload(details, paused.payload)
    return [routing.Outgoing(actor=naming.SINK, envelope=failed)]


def _flow_error(exc: Exception) -> FlowError:
    """P-FLOW-20: what the interpreter raised, as the flow's error; a ``FlowError`` as it is, anything else named."""
    if isinstance(exc, FlowError):
        return exc
    detail = str(exc)
    return FlowError(f"continuation failed: {type(exc).__name__}" + (f": {detail}" if detail else ""))


def _deadline(env: Envelope) -> str | None:
    return env.status.deadline_at if env.status is not None else None


def _emit(
    env: Envelope, step: Step, program: Program, *, now: str, error: dict[str, Any] | None
) -> list[routing.Outgoing]:
    status_in = env.status or Status()
    headers = dict(env.headers)
    headers[STATE_HEADER] = step.state.to_header()
    if step.kind == "end":
        headers.pop(STATE_HEADER)
        done = _final(status_in, Phase.SUCCEEDED, Reason.COMPLETED, now=now, deadline_at=step.deadline_at)
        return [routing.Outgoing(actor=naming.SINK, envelope=_with(env, env.route, headers, done, step.payload))]
    if step.kind == "fanout":
        return _slices(env, step, program, headers, now=now)
    if step.kind == "sleep":
        # P-WAIT-3: x-resume runs the rest when the delay is over; whoever sends this delays it (asya.transport)
        headers[hdr.DELAY_UNTIL] = format_ts(_now(now) + timedelta(seconds=step.sleep_seconds))
        headers[hdr.WAKE] = {"seconds": step.sleep_seconds}
        segment: tuple[str, ...] = (naming.RESUME,)
    elif step.kind == "pause":
        headers[hdr.PAUSE] = dict(step.pause or {})
        segment = (naming.PAUSE,)
    else:
        segment = step.route
    route = Route(prev=list(env.route.prev), curr=segment[0], next=list(segment[1:]))
    status = _pending(status_in, route.curr, now=now, deadline_at=step.deadline_at, error=error)
    destination = routing.resolve_override(route.curr, headers, by=status_in.actor or route.curr)
    return [routing.Outgoing(actor=destination, envelope=_with(env, route, headers, status, step.payload))]


def _slices(
    env: Envelope, step: Step, program: Program, headers: dict[str, Any], *, now: str
) -> list[routing.Outgoing]:
    """P-FLOW-8: children first, slice 0 (the state, straight to the aggregator) last. A bounded fan-out with more
    slices than its limit sends slice 0 alone, with ``window`` in its fan-in header: the aggregator starts the
    children (P-MAP-2)."""
    status_in = env.status or Status()
    aggregator = aggregator_name(program.flow)
    hop = len(env.route.prev)
    owner = step.state.owner or env.id
    count = len(step.slices) + 1
    extra: dict[str, Any] = {"set": f"{owner}/{hop}"}
    if step.limit is not None and step.limit < len(step.slices):
        extra["window"] = step.limit
    child_state = step.state
    if step.state.tries:
        child_state = FlowState(**{**_fields(step.state), "base": step.payload})
    status = _pending(status_in, aggregator, now=now, deadline_at=step.deadline_at, error=None)
    route = Route(prev=list(env.route.prev), curr=aggregator, next=[])
    parent = _with(env, route, headers, status, step.payload)
    out = []
    if "window" not in extra:
        children = _Children(parent, child_state, count=count, target=step.target, extra=extra, by=status_in.actor)
        out = [children.child(index, actor, payload, now=now) for index, (actor, payload) in enumerate(step.slices, 1)]
    headers[hdr.FAN_IN] = {**fan_in_header(env.id, 0, count, step.target), **extra}
    out.append(routing.Outgoing(actor=aggregator, envelope=parent))
    return out


def release(
    programs: Programs, parent: Envelope, indexes: Iterable[int], *, count: int, set_id: str, window: int, now: str
) -> list[routing.Outgoing]:
    """P-MAP-2: the children ``indexes`` of a bounded fan-out, for the aggregator that starts them. ``parent`` is slice
    0 as the fan-out sent it (its payload the state, ``route.prev`` and headers those of the fan-out, without
    ``x-asya-fan-in``); the slices are built again from the program, a pure function of the state, so they are the
    ones an unbounded fan-out would have sent. A failure to build them fails the task (P-FLOW-20)."""
    try:
        state = FlowState.from_header(parent.headers[STATE_HEADER])
        program = resolve(programs, state)
        ins = program.code[state.pc - 1] if 0 < state.pc <= len(program.code) else {"op": "?"}
        if ins["op"] not in ("fanout", "map"):
            raise FlowError(f"flow '{state.flow}': no fan-out before position {state.pc} to start slices of")
        slices = fanout_slices(ins, parent.payload)
        if len(slices) + 1 != count:
            found = f"the fan-out at {state.pc - 1} has {len(slices)} slices, not {count - 1}"
            raise FlowError(f"flow '{state.flow}': {found}")
    except Exception as exc:
        return [_failed(parent, _flow_error(exc), now=now)]
    child_state = state
    if state.tries:
        child_state = FlowState(**{**_fields(state), "base": parent.payload})
    extra = {"set": set_id, "window": window}
    by = parent.status.actor if parent.status is not None else None
    children = _Children(parent, child_state, count=count, target=str(ins["target"]), extra=extra, by=by)
    return [children.child(i, *slices[i - 1], now=now) for i in sorted(set(indexes)) if 1 <= i < count]


class _Children:
    """Builds the child slices of one fan-out from its slice 0 (``parent``), wherever they are sent from."""

    def __init__(
        self,
        parent: Envelope,
        state: FlowState,
        *,
        count: int,
        target: str,
        extra: Mapping[str, Any],
        by: str | None,
    ) -> None:
        self.parent, self.state, self.count, self.target, self.extra, self.by = parent, state, count, target, extra, by
        self.hop = len(parent.route.prev)
        self.aggregator = aggregator_name(state.flow)

    def child(self, index: int, actor: str, payload: Any, *, now: str) -> routing.Outgoing:
        parent = self.parent
        status_in = parent.status or Status()
        headers = {k: v for k, v in parent.headers.items() if k != hdr.FAN_IN}
        headers[STATE_HEADER] = self.state.to_header()
        headers[hdr.FAN_IN] = {**fan_in_header(parent.id, index, self.count, self.target), **self.extra}
        child = Envelope(
            id=str(uuid.uuid5(_SLICE_NAMESPACE, f"{parent.id}\x1f{self.hop}\x1f{index}")),
            parent_id=parent.id,
            route=Route(prev=list(parent.route.prev), curr=actor, next=[self.aggregator]),
            payload=payload,
            headers=headers,
            status=_pending(status_in, actor, now=now, deadline_at=status_in.deadline_at, error=None),
        )
        destination = routing.resolve_override(actor, headers, by=self.by or actor)
        return routing.Outgoing(actor=destination, envelope=child)


def _fields(state: FlowState) -> dict[str, Any]:
    return {
        "flow": state.flow,
        "pc": state.pc,
        "owner": state.owner,
        "loops": state.loops,
        "tries": state.tries,
        "deadlines": state.deadlines,
        "digest": state.digest,
    }


def _pending(
    status_in: Status, actor: str, *, now: str, deadline_at: str | None, error: dict[str, Any] | None
) -> Status:
    return Status(
        phase=Phase.PENDING.value,
        actor=actor,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=deadline_at,
        error=error,
    )


def _with(env: Envelope, route: Route, headers: dict[str, Any], status: Status, payload: Any) -> Envelope:
    return Envelope(id=env.id, parent_id=env.parent_id, route=route, payload=payload, headers=headers, status=status)


def _final(
    status_in: Status,
    phase: Phase,
    reason: Reason,
    *,
    now: str,
    deadline_at: str | None,
    error: dict[str, Any] | None = None,
) -> Status:
    """The task's final status for x-sink: the hop's actor, attempts and creation time kept."""
    return Status(
        phase=phase.value,
        reason=reason.value,
        actor=status_in.actor,
        attempt=status_in.attempt,
        max_attempts=status_in.max_attempts,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=deadline_at,
        error=error,
    )


def flow_failure(env: Envelope, exc: FlowError, *, now: str) -> routing.Outgoing:
    """The x-sink envelope that fails ``env``'s task with ``exc`` (P-FLOW-13), as a continuation would: for a runtime
    that finds, before a hop, that the hop's flow cannot go on (P-FLOWV-2)."""
    return _failed(env, exc, now=now)


def _failed(env: Envelope, exc: FlowError, *, now: str) -> routing.Outgoing:
    """P-FLOW-13: the task fails with ``FlowError`` under the flow's owner id."""
    status_in = env.status or Status()
    owner = env.id
    raw = env.headers.get(STATE_HEADER)
    if isinstance(raw, Mapping) and isinstance(raw.get("owner"), str) and raw["owner"]:
        owner = raw["owner"]
    details = {
        "message": str(exc),
        "type": "asya.flows.errors.FlowError",
        "mro": ["asya.exceptions.AsyaError", "Exception"],
    }
    if isinstance(exc, FlowVersionMissingError):  # named apart: no other program may run for it (P-FLOWV-2)
        details["type"] = "asya.flows.versions.FlowVersionMissingError"
        details["mro"] = ["asya.flows.errors.FlowError", *details["mro"]]
    status = _final(
        status_in, Phase.FAILED, Reason.RUNTIME_ERROR, now=now, deadline_at=status_in.deadline_at, error=details
    )
    failed = Envelope(
        id=owner,
        parent_id=env.parent_id if owner == env.id else None,
        route=env.route,
        payload=routing.error_payload(details, env.payload),
        headers=dict(env.headers),
        status=status,
    )
    return routing.Outgoing(actor=naming.SINK, envelope=failed)
