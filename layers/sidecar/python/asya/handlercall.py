"""One hop's handler call and what its outcome sends (steps 13-14 of P-PROC-2, P-ABI-11, P-RES-1..14, P-STAT-5).

``HandlerCall.run(handler, hop, outbox)`` calls the handler under the hop's time limit ``T`` (P-TIME-5); each frame
is routed (``asya.routing.forward_frame``), goes on where a compiled flow continues it (P-FLOW-4,
``asya.flows.mesh.continue_outgoing``; every actor: one dropped from a flow still finishes the hops of tasks started
before, P-FLOWV-1) and is staged in the batch's outbox (``asya.outbox``), where it waits for its send; FLY values go
to the task's log through the outbox too. Then, by outcome:

- frames (one or more): frame 0 is released last (P-ROUTE-9, ``asya.outbox``); the caller reports ``completed`` once
  they left;
- zero frames: one x-sink envelope ``Completed``;
- an error after the call yielded at least one frame that was staged for sending (P-RES-10, P-ERR-6, P-ERR-7): a
  partial failure. Every yielded frame is sent, nothing is retried, no final status is written, and x-sump gets a
  notice (reason ``PartialFailure`` with ``status.error.frames_sent``, the frames staged; ``SerializationError`` keeps
  its own reason) before frame 0 leaves last;
- a value the handler produced that cannot be encoded is the handler's error (``asya.abi``, P-ABI-19) and never
  reaches the outbox; ``SerializationError`` from the encoding of an envelope (an oversized frame, P-LARGE-3) before
  any frame of the hop left (the outbox drops the ones waiting), or ``HandlerTimeout`` (the call interrupted at
  ``T``, P-TIME-7, P-ERR-7) before any frame: x-sump with the input payload as received, and the layer's final
  status;
- ``TaskCanceledError`` (the task was canceled while a generator ran, thrown at its next yield, P-CANCEL-1..5): no
  retry, no final status (the task item already says ``canceled``). Frames staged before still leave, frame 0 last,
  and the next hop's pre-flight stops them; with none staged, the entry envelope goes to x-sink as ``canceled``
  (reason ``CanceledAtYield``), which acks it;
- any other handler error before any frame: the retry policy (``asya.retry``): a retry, x-sink, or the
  ``on_exhausted`` chain.

A fan-in actor (``fan_in``) holds every frame until the handler returns (P-FANIN-2): on an error nothing was sent
and the retry policy applies in full (P-FANIN-2); on success the ``N + 1`` slices of ``asya.fanin`` leave, slice 0 last.

A call of a compiled flow (the entry carries ``x-asya-flow-state``) returns one payload (P-FLOW-11): its frame is held
until the call ends too, and a second frame makes the call a handler error, ``FlowError: actor '<a>' returned more
than one payload in flow '<f>'``, with nothing sent: neither payload goes on, and section 8 applies to the hop that
sent them.

``run`` answers the number of frames on success and ``None`` after an error. A required send that fails raises, so
the record fails (P-ACK-2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from asya import routing
from asya.abi import AbiState, Frame, Handler, HandlerError, error_details
from asya.config import FanInConfig
from asya.envelope import Envelope, Reason
from asya.exceptions import EnvelopeParseError, SerializationError, TaskCanceledError
from asya.fanin import FanInRouteError, slices
from asya.flows.errors import FlowError
from asya.flows.interp import STATE_HEADER
from asya.flows.mesh import Programs, continue_outgoing
from asya.infra import InfraErrors
from asya.outbox import Outbox, Ticket
from asya.reporting import Fence, HopRef
from asya.retry import Retrier
from asya.timeout import CallGuard, CallLimit, HandlerTimeoutError

__all__ = ["HandlerCall", "Hop", "RecordItem", "pristine_payload"]

_Failure = HandlerError | SerializationError | HandlerTimeoutError


# RecordItem and Hop are plain classes, not dataclasses: generating a dataclass's methods costs cold-start time, and
# neither is compared or printed.


class RecordItem:
    """One SQS record of the batch, parsed before any record runs."""

    __slots__ = ("body", "envelope", "error", "message_id")

    def __init__(
        self,
        body: str,
        *,
        message_id: str = "",
        envelope: Envelope | None = None,
        error: EnvelopeParseError | None = None,
    ) -> None:
        self.body = body
        self.message_id = message_id
        self.envelope = envelope
        self.error = error


class Hop:
    """What the handler call and its outcome need about one record."""

    __slots__ = ("cancel", "entry", "fence", "item", "limit", "report", "ticket", "trace")

    def __init__(
        self,
        *,
        item: RecordItem,
        entry: Envelope,
        trace: routing.Trace,
        report: HopRef | None,
        limit: CallLimit,
        fence: Fence | None,
        ticket: Ticket,
        cancel: Callable[[], bool] | None = None,
    ) -> None:
        self.item = item
        self.entry = entry
        self.trace = trace
        self.report = report  # the task whose status this hop writes: tracked roots only
        self.limit = limit  # T of the handler call (P-TIME-5)
        self.fence = fence  # the hop's claimed fence (P-ACK-8), None when unfenced
        self.ticket = ticket  # the hop's share of the batch's outbox: its frames and FLY values
        self.cancel = cancel  # the cancel check between yields (P-CANCEL-1..5), None when unfenced


def pristine_payload(item: RecordItem) -> Any:
    """The input payload as received: the handler may have mutated the parsed object in place."""
    return json.loads(item.body).get("payload")


class _SecondPayloadError(Exception):
    """Raised out of ``on_frame`` at a flow call's second frame: the generator is closed there (P-FLOW-11)."""

    def __init__(self, error: FlowError) -> None:
        super().__init__(str(error))
        self.error = error


class HandlerCall:
    """Runs one hop's handler and routes its outcome; one per actor runtime, reused across hops."""

    def __init__(
        self,
        *,
        actor: str,
        now: Callable[[], str],
        flows: Programs,
        errors: InfraErrors,
        retrier: Retrier,
        fan_in: FanInConfig | None = None,
    ) -> None:
        self._actor = actor
        self._fan_in = fan_in
        self._now = now
        self._flows = flows
        self._errors = errors
        self._retrier = retrier

    def run(self, handler: Handler, hop: Hop, outbox: Outbox) -> int | None:
        """Run the handler and route its output; the number of frames on success, ``None`` after an error."""
        entry, ticket = hop.entry, hop.ticket

        held: list[Frame] = []  # a fan-in actor's frames, held until the call returns (P-FANIN-2)
        flow_call = self._fan_in is None and STATE_HEADER in entry.headers
        flow_frames: list[Frame] = []  # a flow call's one frame, held until the call returns (P-FLOW-11)

        def on_frame(frame: Frame) -> None:
            if self._fan_in is not None:
                held.append(frame)
                return
            if flow_call:
                flow_frames.append(frame)
                if len(flow_frames) > 1:
                    raise _SecondPayloadError(self._second_payload(entry))
                return
            self._stage(outbox, hop, [self._forward(hop, frame, frame.index)])

        state = AbiState.from_envelope(entry)
        failure: HandlerError | SerializationError | HandlerTimeoutError | None = None
        canceled = False
        try:
            # copy_result=False: a returned plain value is encoded by Outbox.stage in on_frame, before any handler
            # code runs again, so it needs no copy
            handler.run(
                entry.payload,
                state,
                on_frame=on_frame,
                on_fly=lambda value: outbox.fly(ticket, value),
                guard=CallGuard(hop.limit),
                copy_result=False,
                cancel=hop.cancel,
            )
        except (HandlerError, SerializationError, HandlerTimeoutError) as exc:
            failure = exc
        except TaskCanceledError:
            canceled = True
        except _SecondPayloadError as exc:
            failure = HandlerError(exc.error)
        if flow_frames and failure is None and not canceled:
            self._stage(outbox, hop, [self._forward(hop, flow_frames[0], 0)])
        try:
            frames = outbox.close(ticket)  # frames yielded before an error are sent (P-RES-10)
        except SerializationError as exc:
            failure = failure or exc
            frames = 0
        if canceled:
            self._canceled(hop, outbox, frames if self._fan_in is None else 0)
            return None
        if self._fan_in is not None and failure is None:
            try:
                frames = self._send_slices(self._fan_in, held, state, hop, outbox)
            except FanInRouteError as exc:  # a plain ValueError to the handler's error policy (P-FANIN-4)
                failure = HandlerError(ValueError(str(exc)))
            except SerializationError as exc:  # a slice could not be encoded: none was queued
                failure = exc
        # count what will leave, never a frame whose encoding failed (a frames_sent of 1 with nothing sent would
        # leave the task running)
        sent = ticket.staged
        if failure is not None and sent > 0 and self._fan_in is None:
            self._partial(failure, hop, sent)
            outbox.release_first(ticket)  # frame 0 last, after the notice (P-ROUTE-9)
            return None
        if failure is not None:
            self._failed(failure, hop)
            return None
        if frames == 0:
            out = routing.zero_frames_envelope(
                entry,
                actor=self._actor,
                now=self._now(),
                headers=state.headers,
                payload=pristine_payload(hop.item),
                trace=hop.trace,
            )
            self._errors.send(out)
        else:
            outbox.release_first(ticket)
        return frames

    def _forward(self, hop: Hop, frame: Frame, index: int) -> routing.Outgoing:
        # child ids derive from the hop (routing.child_id): a re-run repeats them (P-FAN-2, P-ACK-8)
        return routing.forward_frame(hop.entry, frame, index, actor=self._actor, now=self._now(), trace=hop.trace)

    def _stage(self, outbox: Outbox, hop: Hop, frames: list[routing.Outgoing]) -> None:
        """Stage ``frames`` of ``hop``, each where a compiled flow continues it (P-FLOW-4)."""
        now = self._now()
        continued = [out for frame in frames for out in continue_outgoing(self._flows, frame, now=now)]
        outbox.stage(hop.ticket, continued, frames=len(frames))

    def _second_payload(self, entry: Envelope) -> FlowError:
        state = entry.headers.get(STATE_HEADER)
        flow = state.get("flow") if isinstance(state, dict) else None
        return FlowError(f"actor '{self._actor}' returned more than one payload in flow '{flow or '?'}'")

    def _canceled(self, hop: Hop, outbox: Outbox, frames: int) -> None:
        """P-CANCEL-1..5: the handler stopped at a yield. Frames it yielded before leave (their next pre-flight stops
        them, as any frame of a canceled task); without one, the entry goes to x-sink as ``canceled``."""
        if frames:
            outbox.release_first(hop.ticket)
        else:
            out = routing.canceled_envelope(
                hop.entry, actor=self._actor, now=self._now(), trace=hop.trace, payload=pristine_payload(hop.item)
            )
            self._errors.send(out)

    def _send_slices(self, fan_in: FanInConfig, frames: list[Frame], state: AbiState, hop: Hop, outbox: Outbox) -> int:
        """P-FANIN-3: stage the ``N + 1`` slices; slice 0 keeps the input id, so the outbox holds it until the
        release (P-ROUTE-9)."""
        out = slices(
            hop.entry,
            frames,
            actor=self._actor,
            aggregator=fan_in.aggregator,
            key=fan_in.key,
            final_next=state.next,
            final_headers=state.headers,
            final_deadline_at=state.deadline_at,
            payload=pristine_payload(hop.item),
            now=self._now(),
            trace=hop.trace,
        )
        self._stage(outbox, hop, out)
        outbox.close(hop.ticket)  # raises SerializationError when a slice cannot be encoded: none was queued
        return len(out)

    def _partial(self, failure: HandlerError | SerializationError | HandlerTimeoutError, hop: Hop, sent: int) -> None:
        """P-RES-10, P-ERR-7: the call yielded frames, then failed: x-sump gets a notice, nothing is retried, and no
        final status is written (the task follows frame 0's lineage)."""
        reason = Reason.SERIALIZATION_ERROR if isinstance(failure, SerializationError) else Reason.PARTIAL_FAILURE
        details = error_details(failure)
        # a timeout is named by its reason, as in the notice of a timeout without frames (P-ERR-7), not by the
        # layer's internal exception class
        error_type = Reason.HANDLER_TIMEOUT.value if isinstance(failure, HandlerTimeoutError) else details["type"]
        extra = {"error_type": error_type, **{k: v for k, v in details.items() if k not in ("message", "type")}}
        out = routing.sump_envelope(
            reason=reason,
            message=str(details["message"]),
            actor=self._actor,
            now=self._now(),
            envelope=hop.entry,
            trace=hop.trace,
            original_payload=pristine_payload(hop.item),
            details=extra,
            error_extra={"frames_sent": sent},
        )
        self._errors.send_notice(out, frames_sent=sent)

    def _failed(self, failure: HandlerError | SerializationError | HandlerTimeoutError, hop: Hop) -> None:
        entry, now, payload = hop.entry, self._now(), pristine_payload(hop.item)
        if isinstance(failure, SerializationError):
            self._errors.report(
                Reason.SERIALIZATION_ERROR,
                str(failure),
                entry,
                hop.report,
                now,
                original_payload=payload,
                trace=hop.trace,
                writer_id=hop.item.message_id,
            )
        elif isinstance(failure, HandlerTimeoutError) and self._retrier.caught(
            entry,
            {"message": str(failure), "type": Reason.HANDLER_TIMEOUT.value},
            reason=Reason.HANDLER_TIMEOUT,
            payload=payload,
            trace=hop.trace,
        ):
            return  # a compiled flow's except clause caught it as TimeoutError (P-FLOW-9)
        elif isinstance(failure, HandlerTimeoutError):  # infrastructure: x-sump, never retried (P-ERR-7)
            details = {
                "limit": failure.limit.source.value,
                "limit_seconds": failure.limit.seconds,
                "traceback": error_details(failure)["traceback"],  # shows where the interruption landed
            }
            self._errors.report(
                Reason.HANDLER_TIMEOUT,
                str(failure),
                entry,
                hop.report,
                now,
                original_payload=payload,
                details=details,
                trace=hop.trace,
                writer_id=hop.item.message_id,
            )
        else:  # P-RES-8, P-RES-11, P-RES-12: retry, x-sink or on_exhausted
            self._retrier.handler_error(
                entry, error_details(failure), payload=payload, report=hop.report, trace=hop.trace, fence=hop.fence
            )
