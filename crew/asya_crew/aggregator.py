"""The fan-in aggregator crew actor (P-AGG-1..9; P-ACK-2, P-ACK-8 crew fences).

One runtime serves every aggregator: its name is ``ASYA_ACTOR`` (``x-fanin-{actor}`` or the declared name,
``asya.naming.is_aggregator``); it has no handler. Per record, after the shared crew batch loop
(``asya_crew.runtime``: start rule, parse; no checkpoint):

1. parse failure: x-sump (P-ENV-9..12);
2. route check (P-ROUTE-1): ``RouteMismatch`` to x-sump;
3. ``x-asya-fan-in`` missing or malformed (P-AGG-2): the task fails as in P-AGG-9;
4. pre-flight (P-STAT-10), one consistent read of the origin tasks of the whole batch: a canceled or paused task sends
   the slice to x-sink (which logs it, P-SINK-3); a succeeded or failed task makes the slice a duplicate, acked
   (a failed slice already failed it, P-SINK-3); no task record: untracked, processing goes on;
5. SLA check (P-TIME-3): less than 1 s to ``deadline_at``: x-sink with reason ``Timeout``, which fails the origin;
6. the slice is stored and counted once (``asya_crew.fanin_state``, P-AGG-3; that is the aggregator's hop fence,
   P-ACK-8); a ``slice_count`` other than the stored one fails the task (P-AGG-2, P-AGG-9);
   a child slice (index 1..N) then marks its child item finished (``TaskStore.finish_child``, one write, P-ACK-7),
   so a late copy of the hop that produced it is acked without a handler call; a slice of a bounded fan-out
   (``window`` in its header) of a set not yet emitted sends the children it starts (P-MAP-2: slice 0 the first
   ``window``, child ``i`` child ``i + window``), built from stored slice 0 and the task's program;
7. a delivery that leaves the set incomplete is acked, sending and writing nothing more (P-AGG-7); one that finds
   it complete and not emitted claims the emission (conditional on no claim younger than the queue's visibility
   timeout), reads every slice back in numeric order, merges (``asya_crew.fanin_merge``), sends the merged envelope
   along slice 0's route under the origin id, and marks the set emitted (P-AGG-4..6). A merge failure sends the
   merged identity to x-sink as ``failed`` (reason ``RuntimeError``, the P-RES-14 payload) and marks the set
   (P-AGG-9). An unknown next actor (P-ROUTE-8) sends the merged envelope to x-sump (``UnknownActor``) and fails
   the task (best effort), then marks the set. A send that fails otherwise releases the claim and fails the
   record; a crash between send and mark leaves a claim that lapses after the visibility timeout, so the
   redelivery emits again (at most twice; the next actor's hop claim absorbs the copy, P-ACK-8).

A slice header with ``set`` (a compiled flow's fan-out, P-FLOW-8) keys the fan-in state by it instead of by
``origin_id``; the merged envelope keeps the origin's identity. A merged envelope that ends its route while a
compiled flow is in progress goes on as the flow's continuation, under the emission claim (P-FLOW-6), with the
program of the task's digest, read from the program store when the aggregator does not hold it (P-FLOWV-3); a read
that fails releases the claim and fails the record, a program nowhere fails the task (P-FLOWV-2).

Slice payloads are stored as received (an offloaded ``__ref__`` stays a reference, checked against the slice's own
envelope first: a reference of another task fails the task, P-LARGE-7) and read back from S3 for the merge
(P-LARGE-4); the merged envelope goes through the offloading encoder like every send (P-LARGE-2).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from functools import partial
from typing import Any, Unpack

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import headers as hdr
from asya import prehop, routing
from asya.abi import error_details
from asya.config import ActorConfig
from asya.envelope import Envelope, Reason, Route, Status, parse_envelope
from asya.fanin import MAX_SLICES
from asya.flows.mesh import continue_outgoing, release
from asya.payloads import PayloadUnavailableError, reference_owners
from asya.store import ChildOutcome
from asya.timeutil import format_ts
from asya.transport import UnknownActorError
from asya_crew.checkpoint import CheckpointLine
from asya_crew.entry import lambda_entry
from asya_crew.fanin_merge import MergeError, merged_envelope, merged_identity
from asya_crew.fanin_state import SHARD_SIZE, FanInState, SliceCountMismatchError
from asya_crew.runtime import CrewOptions, CrewRuntime, Parsed

__all__ = ["AggregatorRuntime", "FanInHeaderError", "lambda_handler"]


class FanInHeaderError(ValueError):
    """P-AGG-2: ``x-asya-fan-in`` is missing or malformed."""


class _Header:
    __slots__ = ("count", "index", "key", "origin", "set", "state_key", "window")

    def __init__(
        self, origin: str, index: int, count: int, key: str, *, state_key: str | None = None, window: int | None = None
    ) -> None:
        self.origin, self.index, self.count, self.key = origin, index, count, key
        # P-FLOW-8: a compiled flow's fan-out names its set, so a fan-out in a loop gets a fresh one
        self.set = state_key
        self.state_key = state_key or origin
        self.window = window  # P-MAP-2: a bounded fan-out, whose children this aggregator starts


class AggregatorRuntime(CrewRuntime):
    """A fan-in aggregator: stores and counts slices, emits the merged envelope exactly once."""

    def __init__(self, config: ActorConfig, *, shard_size: int = SHARD_SIZE, **options: Unpack[CrewOptions]) -> None:
        """``shard_size``: indexes per shard item of the fan-in set (``asya_crew.fanin_state``)."""
        super().__init__(config, **options)
        self._state = FanInState(
            table=config.table,
            bucket=config.bucket,
            dynamodb=options.get("dynamodb"),
            s3=lambda: self.s3,
            shard_size=shard_size,
        )
        # the local mode's workers share one runtime: each thread keeps its own batch's pre-flight
        self._batch = threading.local()

    def handle(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """The batch loop, after one consistent read of the batch's origin tasks (pre-flight, P-STAT-10)."""
        origins: dict[Hashable, None] = {}
        for raw in event.get("Records") or []:
            try:
                envelope = parse_envelope(raw.get("body", ""))
                origins[_header(envelope).origin] = None
            except Exception:  # decided per record by the batch loop; raising here would fail the whole batch
                continue
        self._batch.statuses = self._store.statuses([str(o) for o in origins]) if origins else {}
        return super().handle(event, context)

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        return None

    def _complete(self, record: SQSRecord, prepared: Parsed, checkpoint: CheckpointLine | None) -> None:
        now_dt = self._clock()
        now = format_ts(now_dt)
        env = prepared.envelope
        actor = self.config.actor
        trace = routing.Trace.for_hop(env.headers, enabled=self.config.tracing)
        decide = partial(prehop.decide, env, actor=actor, now=now, trace=trace, send=self._send, logger=self._log)
        if (refused := prehop.refusal(env, actor)) is not None:
            decide(refused)
            return
        try:
            header = _header(env)
        except FanInHeaderError as exc:
            self._fail_unsliced(env, str(exc), now, trace)
            return
        statuses: dict[str, str] = getattr(self._batch, "statuses", {})
        status = None if hdr.is_stealth(env.headers) else statuses.get(header.origin)
        # a failed task: a failed slice already failed it (P-SINK-3)
        verdict = prehop.preflight(env, status, actor=actor, now=now, trace=trace) or prehop.sla(
            env, prehop.deadline_of(env), now_dt, actor=actor, now=now, trace=trace
        )
        if verdict is not None:
            decide(verdict)
            return
        try:  # a slice is stored as received, so its reference is checked against its own envelope now (P-LARGE-7)
            self._payloads.check_owner(env.payload, reference_owners(env))
        except PayloadUnavailableError as exc:
            self._fail_merge(header.origin, env, str(exc), now, trace, payload=env.payload, state_key=header.state_key)
            return
        now_ms = int(now_dt.timestamp() * 1000)
        try:
            progress = self._state.add(
                header.state_key,
                index=header.index,
                count=header.count,
                key=header.key,
                payload=env.payload,
                parent=_parent_fields(env) if header.index == 0 else None,
                now_ms=now_ms,
            )
        except SliceCountMismatchError as exc:
            self._fail_merge(header.origin, env, str(exc), now, trace, payload=env.payload, state_key=header.state_key)
            return
        if header.index and env.parent_id and not hdr.is_stealth(env.headers):
            # the slice's hop completed: a late copy of it is a duplicate from now on (P-ACK-7)
            done = ChildOutcome(writer_id=record.message_id, phase="succeeded")
            self._store.finish_child(env.id, env.parent_id, done)
        if header.window is not None and header.set is not None and not progress.emitted:
            self._release(header, env, now)
        if not progress.complete or progress.emitted:
            return  # P-AGG-7: nothing sent, nothing written
        self._emit(header, now, now_ms)

    def _release(self, header: _Header, env: Envelope, now: str) -> None:
        """P-MAP-2: slice 0 starts the first ``window`` children, child ``i`` child ``i + window``. Every delivery
        that stored its slice sends them (a redelivery again: the children's hop claims absorb the copies), and a
        send that fails fails the record."""
        assert header.window is not None and header.set is not None
        if header.index == 0:
            indexes = range(1, min(header.window, header.count - 1) + 1)
            fields, payload = _parent_fields(env), env.payload
        else:
            if header.index + header.window >= header.count:
                return
            indexes = range(header.index + header.window, header.index + header.window + 1)
            stored = self._state.read_slice(header.state_key, 0)  # slice 0 was stored before any child was sent
            fields, payload = stored.parent or {}, stored.payload
        # the reference was checked against slice 0's own envelope when it was stored (P-LARGE-7)
        parent = _parent_envelope(header.origin, fields, self._payloads.rehydrate(payload, owners=None))
        self._flows.load(parent.headers)  # the task's program (P-FLOWV-3); a failed read fails the record
        book = self._flows.book
        for out in release(book, parent, indexes, count=header.count, set_id=header.set, window=header.window, now=now):
            self._transport.send(out.actor, out.envelope)

    def _emit(self, header: _Header, now: str, now_ms: int) -> None:
        visibility_ms = self._transport.visibility_timeout(self.config.actor) * 1000
        if not self._state.claim(header.state_key, now_ms=now_ms, stale_before_ms=now_ms - visibility_ms):
            self._log.info("fan-in set already claimed or emitted: acked")
            return
        try:
            slices = self._state.read(header.state_key, header.count)
            parent = slices[0].parent or {}
            trace = routing.Trace.for_hop(parent.get("headers") or {}, enabled=self.config.tracing)
            # every slice's reference was checked against its own envelope when it was stored (P-LARGE-7)
            parent_payload = self._payloads.rehydrate(slices[0].payload, owners=None)
            try:
                payloads = [self._payloads.rehydrate(s.payload, owners=None) for s in slices[1:]]
                envelope, actor = merged_envelope(
                    header.origin, parent, parent_payload, header.key, payloads, aggregator=self.config.actor, now=now
                )
            except MergeError as exc:
                self._fail_merge(
                    header.origin,
                    None,
                    str(exc),
                    now,
                    trace,
                    payload=parent_payload,
                    parent=parent,
                    state_key=header.state_key,
                )
                return
            self._flows.load(envelope.headers)  # the task's program (P-FLOWV-3); a failed read fails the record
            try:
                for out in continue_outgoing(self._flows.book, routing.Outgoing(actor, envelope), now=now):
                    self._transport.send(out.actor, out.envelope)  # a compiled flow goes on here (P-FLOW-6)
            except UnknownActorError as exc:
                self._unknown_destination(header.origin, envelope, exc, now, trace)
        except Exception:
            try:
                self._state.release(header.state_key, claimed_ms=now_ms)
            except Exception as exc:  # the claim lapses after the visibility timeout anyway
                self._log.warning("could not release the fan-in claim", extra={"error": str(exc)})
            raise
        self._state.mark(header.state_key, now_ms=now_ms)
        self._log.info("fan-in set emitted", extra={"origin_id": header.origin, "slice_count": header.count})

    def _unknown_destination(
        self, origin: str, envelope: Envelope, error: UnknownActorError, now: str, trace: routing.Trace
    ) -> None:
        """P-ROUTE-8: the merged envelope's next actor has no queue (a handler rewrote ``route.next``): x-sump with
        reason ``UnknownActor`` (required), then the task's final ``failed`` (best effort, P-ERR-6)."""
        out = routing.sump_envelope(
            reason=Reason.UNKNOWN_ACTOR,
            message=str(error),
            actor=self.config.actor,
            now=now,
            envelope=envelope,
            trace=trace,
            original_payload=envelope.payload,
        )
        self._send(out)
        if envelope.parent_id is None and not hdr.is_stealth(envelope.headers):
            try:
                self._store.report_final(origin, status="failed", error=str(error), failed_actor=self.config.actor)
            except Exception as exc:  # best effort: the backstop fails the task at its deadline otherwise
                self._log.warning("could not write the final failed status", extra={"error": str(exc)})
        self._log.error("merged envelope has an unknown destination: sent to x-sump", extra={"error": str(error)})

    def _fail_merge(
        self,
        origin: str,
        env: Envelope | None,
        message: str,
        now: str,
        trace: routing.Trace,
        *,
        payload: Any,
        parent: Mapping[str, Any] | None = None,
        state_key: str | None = None,
    ) -> None:
        """P-AGG-9: the merged identity to x-sink as ``failed`` (``RuntimeError``), then the set is marked."""
        if parent is None:
            assert env is not None
            parent = _parent_fields(env) if env.id == origin else {"headers": env.headers}
        identity, _ = merged_identity(origin, parent, aggregator=self.config.actor, now=now)
        self._send_failure(identity, message, now, trace, payload)
        self._state.mark(state_key or origin, now_ms=int(self._clock().timestamp() * 1000))

    def _fail_unsliced(self, env: Envelope, message: str, now: str, trace: routing.Trace) -> None:
        """P-AGG-2 without a usable header: the task named by ``parent_id`` (a slice) or ``id`` fails."""
        origin = env.parent_id or env.id
        headers = {k: v for k, v in env.headers.items() if k != hdr.FAN_IN}
        headers[hdr.ORIGIN_ID] = origin
        failed = Envelope(id=origin, route=env.route, payload=None, headers=headers, status=env.status)
        self._send_failure(failed, message, now, trace, env.payload)

    def _send_failure(self, entry: Envelope, message: str, now: str, trace: routing.Trace, payload: Any) -> None:
        details = error_details(RuntimeError(message))
        details.pop("traceback", None)
        self._send(
            routing.failure_envelope(
                entry, details, actor=self.config.actor, now=now, original_payload=payload, trace=trace
            )
        )
        self._log.error("fan-in failed the task", extra={"error": message})

    def _send(self, out: routing.Outgoing) -> None:
        self._transport.send(out.actor, out.envelope)


def _header(env: Envelope) -> _Header:
    value = env.headers.get(hdr.FAN_IN)
    if not isinstance(value, dict):
        raise FanInHeaderError(f"header {hdr.FAN_IN} is missing or not an object: {value!r}")
    origin, index, count, key = (value.get(k) for k in ("origin_id", "slice_index", "slice_count", "aggregation_key"))
    if not isinstance(origin, str) or not origin:
        raise FanInHeaderError(f"header {hdr.FAN_IN}.origin_id must be a non-empty string, got {origin!r}")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_SLICES:
        raise FanInHeaderError(f"header {hdr.FAN_IN}.slice_count must be an integer 1..{MAX_SLICES}, got {count!r}")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
        raise FanInHeaderError(f"header {hdr.FAN_IN}.slice_index must be an integer 0..{count - 1}, got {index!r}")
    if not isinstance(key, str) or not key.startswith("/"):
        raise FanInHeaderError(f"header {hdr.FAN_IN}.aggregation_key must be a JSON Pointer, got {key!r}")
    set_key = value.get("set")
    if set_key is not None and (not isinstance(set_key, str) or not set_key):
        raise FanInHeaderError(f"header {hdr.FAN_IN}.set must be a non-empty string, got {set_key!r}")
    window = value.get("window")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1 or not set_key):
        raise FanInHeaderError(f"header {hdr.FAN_IN}.window must be a positive integer with a set, got {window!r}")
    return _Header(origin, index, count, key, state_key=set_key, window=window)


def _parent_envelope(origin: str, parent: Mapping[str, Any], payload: Any) -> Envelope:
    """Slice 0 as the fan-out sent it, from what was stored of it (P-AGG-3), for :func:`release` (P-MAP-2)."""
    route = parent.get("route") if isinstance(parent.get("route"), dict) else {}
    assert isinstance(route, dict)
    parent_id = parent.get("parent_id")
    return Envelope(
        id=origin,
        parent_id=parent_id if isinstance(parent_id, str) and parent_id else None,
        route=Route(
            prev=[str(a) for a in route.get("prev", [])],
            curr=str(route.get("curr", "")),
            next=[str(a) for a in route.get("next", [])],
        ),
        payload=payload,
        headers=dict(parent.get("headers") or {}),
        status=Status(created_at=parent.get("created_at"), deadline_at=parent.get("deadline_at")),
    )


def _parent_fields(env: Envelope) -> dict[str, Any]:
    """What slice 0 stores besides its payload (P-AGG-3)."""
    status = env.status
    return {
        "parent_id": env.parent_id,
        "route": env.route.to_dict(),
        "headers": {k: v for k, v in env.headers.items() if k != hdr.FAN_IN},
        "created_at": status.created_at if status is not None else None,
        "deadline_at": status.deadline_at if status is not None else None,
    }


lambda_handler = lambda_entry(AggregatorRuntime)
