"""Routing decisions: pure functions from an input envelope (and a handler's frames) to outgoing envelopes.

Nothing here does I/O (but for one warning log line, :func:`resolve_override`) or reads the clock: callers pass
``now`` (an envelope timestamp, P-GEN-3). Fan-out child ids are derived from the hop and the frame index
(:func:`child_id`), so a redelivered hop repeats them (P-ACK-8). The functions never mutate their arguments; outgoing
envelopes share the payload object they were given (no copies: the runtime owns the parsed input and never mutates
it).

Statements implemented: route check (P-ROUTE-1), shift (P-ROUTE-2), forwarded frames (P-ROUTE-3), end of route
(P-ROUTE-4), zero frames (P-ROUTE-5), route override (P-ROUTE-7), fan-out ids (P-FAN-2), the entry update (P-PROC-4),
pre-flight envelopes (P-STAT-10), SLA envelopes (P-TIME-3), the failure envelope of a handler error without a policy
(P-RES-11, P-RES-14), the x-sump envelope (P-ERR-4), trace headers (P-TRACE-1) and the hop count (P-HOP-1).
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, Protocol

from asya import headers as hdr
from asya import naming
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.hops import hop_count
from asya.timeutil import parse_ts

__all__ = [
    "DEADLINE_ERROR_TYPE",
    "SLA_MESSAGE",
    "FrameLike",
    "Outgoing",
    "Trace",
    "canceled_envelope",
    "child_id",
    "entry_attempt",
    "entry_update",
    "error_payload",
    "failure_envelope",
    "forward_frame",
    "frame_identity",
    "new_uuid4",
    "preflight_envelope",
    "resolve_override",
    "route_mismatch",
    "shift",
    "sla_envelope",
    "sump_envelope",
    "sump_writes_final",
    "unknown_route",
    "zero_frames_envelope",
]

SLA_MESSAGE: Final = "SLA deadline expired"
#: ``status.error`` member of an x-sump envelope whose task x-sump fails itself (value ``"x-sump"``): set by the layer
#: of an actor that reports over HTTP, which cannot post ``failed`` (GW-EVT-3, P-SUMP-6).
_FINAL_BY: Final = "final_by"
#: ``status.error.type`` of an SLA envelope (P-TIME-3, chosen).
DEADLINE_ERROR_TYPE: Final = "DeadlineExceeded"

_log = logging.getLogger(__name__)

#: Salt of :func:`child_id`, so child ids never coincide with other hashes of the same text.
#: The namespace of fan-out child ids (P-FAN-2): fixed forever, or re-runs across a release would mint new ids.
_CHILD_ID_NAMESPACE: Final = uuid.UUID("6f1c0c52-3d0e-5b7a-9a43-0a5e7f2b9c11")


def new_uuid4() -> str:
    """A new UUID4 in lowercase canonical form (P-FAN-2)."""
    return str(uuid.uuid4())


class FrameLike(Protocol):
    """What routing needs from one handler frame (``asya.abi.Frame`` satisfies it)."""

    @property
    def payload(self) -> Any: ...
    @property
    def next(self) -> list[str]: ...
    @property
    def headers(self) -> dict[str, Any]: ...
    @property
    def deadline_at(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One envelope to send: ``actor`` is the physical destination whose queue receives it (after overrides)."""

    actor: str
    envelope: Envelope


@cache
def _traceparent() -> re.Pattern[str]:
    # compiled on first use, not at import: only traced actors parse it
    return re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True, slots=True)
class Trace:
    """The trace headers written on every send of one hop (P-TRACE-1, P-HDR-3)."""

    traceparent: str | None = None
    tracestate: str | None = None
    #: ``x-asya-hops`` of every send of the hop: the input's count plus one (P-HOP-1); ``None``: left as is
    hops: int | None = None

    @classmethod
    def for_hop(cls, headers: Mapping[str, Any], *, enabled: bool, span_id: Callable[[], str] | None = None) -> Trace:
        """Keep the input's trace id; a new span id per hop when tracing is enabled, else the input value unchanged.

        A malformed ``traceparent`` is passed on unchanged either way.
        """
        parent = headers.get(hdr.TRACEPARENT)
        state = headers.get(hdr.TRACESTATE)
        parent = parent if isinstance(parent, str) else None
        state = state if isinstance(state, str) else None
        if enabled and parent is not None and (match := _traceparent().match(parent)):
            new_span = (span_id or _new_span_id)()
            parent = f"{match.group(1)}-{match.group(2)}-{new_span}-{match.group(4)}"
        return cls(traceparent=parent, tracestate=state, hops=hop_count(headers) + 1)

    def headers(self, source: Mapping[str, Any]) -> dict[str, Any]:
        """The headers of a send derived from ``source`` (a copy): the layer-managed ones set whatever a handler wrote
        (P-HDR-3), the trace headers to this hop's and ``x-asya-delay-until`` dropped (only a chained retry delay
        sets it, P-RES-9, on the copy this returns)."""
        out = dict(source)
        for name, value in ((hdr.TRACEPARENT, self.traceparent), (hdr.TRACESTATE, self.tracestate)):
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        out.pop(hdr.DELAY_UNTIL, None)
        if self.hops is not None:
            out[hdr.HOPS] = self.hops
        return out


def _new_span_id() -> str:
    return os.urandom(8).hex()  # secrets.token_hex's own source, without importing hmac at start-up


def route_mismatch(envelope: Envelope, actor: str) -> str | None:
    """``None`` when ``actor`` may process ``envelope`` (P-ROUTE-1), else the RouteMismatch message."""
    curr = envelope.route.curr
    if curr == actor:
        return None
    override = envelope.headers.get(hdr.ROUTE_OVERRIDE)
    if isinstance(override, dict) and curr and override.get(curr) == actor:
        return None
    return f"route mismatch: envelope for '{curr}' delivered to '{actor}'"


def shift(route: Route, next_actors: list[str]) -> Route:
    """The route of a frame whose ``route.next`` is ``next_actors`` (P-ROUTE-2)."""
    return route.shifted(next_actors)


def frame_identity(envelope: Envelope, index: int, new_id: Callable[[], str] | None = None) -> tuple[str, str | None]:
    """``(id, parent_id)`` of frame ``index`` (P-FAN-2): frame 0 keeps both; later frames are children of the input,
    with :func:`child_id` unless ``new_id`` is given. ``envelope`` is the entry-updated input."""
    if index == 0:
        return envelope.id, envelope.parent_id
    return (new_id() if new_id is not None else child_id(envelope, index)), envelope.id


def child_id(entry: Envelope, index: int) -> str:
    """The id of child frame ``index`` of the hop ``entry`` (P-FAN-2): a name-based UUID (version 5, lowercase
    canonical form) of the input id, the hop ``h = len(route.prev) + 1`` and ``index``, so a re-run of the hop, any
    attempt, yields the same child ids and the children's hop claims absorb duplicates (P-ACK-8)."""
    name = f"{entry.id}\x1f{len(entry.route.prev) + 1}\x1f{index}"
    return str(uuid.uuid5(_CHILD_ID_NAMESPACE, name))


def entry_attempt(envelope: Envelope, actor: str) -> int:
    """The attempt ``actor`` runs ``envelope`` as (P-PROC-4): kept for its own retry, else 1."""
    old = envelope.status
    return old.attempt if old is not None and old.phase == Phase.RETRYING and old.actor == actor else 1


def entry_update(envelope: Envelope, actor: str, now: str) -> Envelope:
    """The envelope as the handler call sees it (P-PROC-4); shares ``route`` and ``payload`` with the input."""
    old = envelope.status
    is_retry = old is not None and old.phase == Phase.RETRYING and old.actor == actor
    status = Status(
        phase=Phase.PROCESSING.value,
        actor=actor,
        attempt=entry_attempt(envelope, actor),
        max_attempts=old.max_attempts if is_retry and old is not None else 1,
        created_at=(old.created_at if old is not None else None) or now,
        updated_at=now,
        deadline_at=old.deadline_at if old is not None else None,
    )
    headers = dict(envelope.headers)
    if not (is_retry and parse_ts(headers.get(hdr.FIRST_ATTEMPT)) is not None):
        headers[hdr.FIRST_ATTEMPT] = now
    return Envelope(
        id=envelope.id,
        route=envelope.route,
        payload=envelope.payload,
        parent_id=envelope.parent_id,
        headers=headers,
        status=status,
    )


def resolve_override(logical: str, headers: dict[str, Any], *, by: str) -> str:
    """The physical destination of ``logical`` (P-ROUTE-7); records ``x-asya-route-resolved`` in ``headers``.

    Never applies to x-sink and x-sump. A crew target (``x-`` prefix) is ignored with a warning: the crew would ack
    the envelope without a final status and the task would stay ``running`` until its deadline. Any other target is
    returned unchecked: the transport rejects an invalid name as ``UnknownActor`` (P-ROUTE-8).
    """
    if logical in (naming.SINK, naming.SUMP):
        return logical
    override = headers.get(hdr.ROUTE_OVERRIDE)
    if not isinstance(override, dict):
        return logical
    target = override.get(logical)
    if not isinstance(target, str) or not target:
        return logical
    if naming.is_crew(target):
        _log.warning("route override of %r to crew actor %r ignored (P-ROUTE-7)", logical, target[:64])
        return logical
    resolved = headers.get(hdr.ROUTE_RESOLVED)
    headers[hdr.ROUTE_RESOLVED] = {
        **(resolved if isinstance(resolved, dict) else {}),
        logical: {"target": target, "by": by},
    }
    return target


def forward_frame(
    entry: Envelope,
    frame: FrameLike,
    index: int,
    *,
    actor: str,
    now: str,
    trace: Trace,
    new_id: Callable[[], str] | None = None,
) -> Outgoing:
    """The envelope for one frame (P-ROUTE-2..4, P-ROUTE-7, P-FAN-2, P-FAN-4). ``entry`` is the entry-updated input."""
    status_in = entry.status or Status()
    route = entry.route.shifted(frame.next)
    env_id, parent_id = frame_identity(entry, index, new_id)
    headers = trace.headers(frame.headers)
    if route.curr:
        destination = resolve_override(route.curr, headers, by=actor)
        status = Status(
            phase=Phase.PENDING.value,
            actor=route.curr,
            created_at=status_in.created_at,
            updated_at=now,
            deadline_at=frame.deadline_at,
        )
    else:
        destination = naming.SINK
        status = _completed(status_in, actor=actor, now=now, deadline_at=frame.deadline_at)
    envelope = Envelope(
        id=env_id, route=route, payload=frame.payload, parent_id=parent_id, headers=headers, status=status
    )
    return Outgoing(actor=destination, envelope=envelope)


def zero_frames_envelope(
    entry: Envelope,
    *,
    actor: str,
    now: str,
    headers: Mapping[str, Any],
    payload: Any,
    trace: Trace,
) -> Outgoing:
    """Zero frames (P-ROUTE-5): route not shifted, the input payload, ``headers`` = the ABI headers at the end."""
    status_in = entry.status or Status()
    out_headers = trace.headers(headers)
    status = _completed(status_in, actor=actor, now=now, deadline_at=status_in.deadline_at)
    return Outgoing(actor=naming.SINK, envelope=_derived(entry, out_headers, status, payload))


def _completed(status_in: Status, *, actor: str, now: str, deadline_at: str | None) -> Status:
    """Phase ``succeeded``, reason ``Completed``: the route ended at ``actor`` (P-ROUTE-4, P-ROUTE-5)."""
    return Status(
        phase=Phase.SUCCEEDED.value,
        reason=Reason.COMPLETED.value,
        actor=actor,
        attempt=status_in.attempt,
        max_attempts=status_in.max_attempts,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=deadline_at,
    )


def error_payload(details: Mapping[str, Any], original_payload: Any) -> dict[str, Any]:
    """``{"error": "<type>: <message>", "details", "original_payload"}`` with ``error`` on one line (P-RES-14)."""
    text = f"{details.get('type', 'Exception')}: {details.get('message', '')}"
    return {"error": " ".join(text.splitlines()), "details": dict(details), "original_payload": original_payload}


def failure_envelope(
    entry: Envelope,
    details: Mapping[str, Any],
    *,
    actor: str,
    now: str,
    original_payload: Any,
    trace: Trace,
    reason: Reason = Reason.RUNTIME_ERROR,
    max_attempts: int | None = None,
) -> Outgoing:
    """A handler error with no policy, or an exhausted one, to x-sink (P-RES-11, P-RES-14): route unchanged.

    ``max_attempts`` is the exhausted policy's (default: as on entry)."""
    status_in = entry.status or Status()
    out_headers = trace.headers(entry.headers)
    status = Status(
        phase=Phase.FAILED.value,
        reason=reason.value,
        actor=actor,
        attempt=status_in.attempt,
        max_attempts=status_in.max_attempts if max_attempts is None else max_attempts,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=status_in.deadline_at,
        error=dict(details),
    )
    payload = error_payload(details, original_payload)
    return Outgoing(actor=naming.SINK, envelope=_derived(entry, out_headers, status, payload))


def preflight_envelope(envelope: Envelope, task_status: str, *, actor: str, now: str, trace: Trace) -> Outgoing:
    """A canceled or paused task (P-STAT-10): to x-sink with phase/reason set, other members kept."""
    if task_status == Phase.CANCELED:
        phase, reason = Phase.CANCELED, Reason.PREFLIGHT_CANCELED
    elif task_status == Phase.PAUSED:
        phase, reason = Phase.PAUSED, Reason.PREFLIGHT_PAUSED
    else:
        raise ValueError(f"pre-flight stops only canceled or paused tasks, got task status {task_status!r}")
    error = envelope.status.error if envelope.status is not None else None
    return _stopped(envelope, phase, reason, error, actor=actor, now=now, trace=trace)


def canceled_envelope(envelope: Envelope, *, actor: str, now: str, trace: Trace, payload: Any) -> Outgoing:
    """A generator stopped at a yield because its task was canceled (P-CANCEL-1..5): the hop's entry envelope to
    x-sink, phase ``canceled``, reason ``CanceledAtYield``, with ``payload`` (the input as the hop received it)."""
    out = preflight_envelope(envelope, Phase.CANCELED, actor=actor, now=now, trace=trace)
    assert out.envelope.status is not None  # preflight_envelope always sets one
    out.envelope.status.reason = Reason.CANCELED_AT_YIELD.value
    out.envelope.payload = payload
    return out


def sla_envelope(envelope: Envelope, *, actor: str, now: str, trace: Trace) -> Outgoing:
    """Deadline expired before the handler call (P-TIME-3): to x-sink, route, headers and payload unchanged."""
    error = {"message": SLA_MESSAGE, "type": DEADLINE_ERROR_TYPE}
    return _stopped(envelope, Phase.FAILED, Reason.TIMEOUT, error, actor=actor, now=now, trace=trace)


def _stopped(
    envelope: Envelope,
    phase: Phase,
    reason: Reason,
    error: dict[str, Any] | None,
    *,
    actor: str,
    now: str,
    trace: Trace,
) -> Outgoing:
    """A task stopped before the handler call, to x-sink: route, headers and payload as they came, the status's
    attempts, creation time (``now`` when none) and deadline kept."""
    old = envelope.status or Status()
    status = Status(
        phase=phase.value,
        reason=reason.value,
        actor=actor,
        attempt=old.attempt,
        max_attempts=old.max_attempts,
        created_at=old.created_at or now,
        updated_at=now,
        deadline_at=old.deadline_at,
        error=error,
    )
    out_headers = trace.headers(envelope.headers)
    return Outgoing(actor=naming.SINK, envelope=_derived(envelope, out_headers, status, envelope.payload))


_MISSING: Final = object()


def unknown_route() -> Route:
    """The route of an x-sump envelope whose input route is unknown (P-ERR-4)."""
    return Route([], naming.SUMP, [])


def sump_envelope(
    *,
    reason: Reason,
    message: str,
    actor: str,
    now: str,
    envelope: Envelope | None = None,
    trace: Trace,
    original_payload: Any = _MISSING,
    details: Mapping[str, Any] | None = None,
    new_id: Callable[[], str] = new_uuid4,
    error_extra: Mapping[str, Any] | None = None,
    final_by_sump: bool = False,
) -> Outgoing:
    """The infrastructure-error envelope (P-ERR-4), its headers those of ``envelope`` as any send's (P-HDR-3);
    ``error_extra`` adds members to ``status.error`` (``frames_sent`` of a partial failure, P-RES-10);
    ``final_by_sump`` asks x-sump to write the task's final ``failed`` status (:func:`sump_writes_final`).

    ``envelope`` is the input as far as it is known (``None`` when nothing of it is: a new id and the route
    ``{[], "x-sump", []}``). ``original_payload`` is left out when not given; ``details`` (for instance ``raw_body``)
    is merged into ``payload.details`` after ``message`` and ``type`` (the reason).
    """
    error: dict[str, Any] = {"message": message, "type": reason.value}
    payload: dict[str, Any] = {"error": " ".join(f"{reason.value}: {message}".splitlines())}
    payload["details"] = {**error, **(details or {})}
    if error_extra:
        error.update(error_extra)
    if final_by_sump:
        error[_FINAL_BY] = naming.SUMP
    if original_payload is not _MISSING:
        payload["original_payload"] = original_payload
    old = envelope.status if envelope is not None else None
    status = Status(
        phase=Phase.FAILED.value,
        reason=reason.value,
        actor=actor,
        attempt=old.attempt if old is not None else 1,
        max_attempts=old.max_attempts if old is not None else 1,
        created_at=(old.created_at if old is not None else None) or now,
        updated_at=now,
        deadline_at=old.deadline_at if old is not None else None,
        error=error,
    )
    if envelope is None:
        out = Envelope(id=new_id(), route=unknown_route(), payload=payload, status=status)
    else:
        out = _derived(envelope, trace.headers(envelope.headers), status, payload)
    return Outgoing(actor=naming.SUMP, envelope=out)


def sump_writes_final(envelope: Envelope) -> bool:
    """True when the layer that sent this x-sump envelope could not write its task's final ``failed`` status and
    x-sump writes it (P-SUMP-6). The member is set by :func:`sump_envelope` alone, on a fresh ``status.error``,
    so no handler or client value can carry it there."""
    error = envelope.status.error if envelope.status is not None else None
    return isinstance(error, dict) and error.get(_FINAL_BY) == naming.SUMP


def _derived(source: Envelope, headers: dict[str, Any], status: Status, payload: Any) -> Envelope:
    """Same id, parent_id and (unshifted) route as ``source``; the route object is copied, never shared."""
    route = Route(list(source.route.prev), source.route.curr, list(source.route.next))
    return Envelope(
        id=source.id, route=route, payload=payload, parent_id=source.parent_id, headers=headers, status=status
    )
