"""One hop's handler call and what its outcome sends (PROTOCOL steps 13-14 of P-PROC-2, P-ABI-11, sections 8 and 10).

``HandlerCall.run(handler, hop, outbox)`` calls the handler under the hop's time limit ``T`` (P-TIME-5); frames leave
through the batch's outbox as the hop releases them (``asya.hop``), FLY values go to the task's log. Then, by outcome:

- frames (one or more): nothing more here; the caller reports ``completed`` once they left;
- zero frames: one x-sink envelope ``Completed`` through the hop's idempotency guard (P-ACK-8);
- ``SerializationError`` or ``HandlerTimeout`` (the call interrupted at ``T``, P-TIME-7, P-ERR-7): x-sump with the
  input payload as received (frames already produced stay sent, P-ABI-11);
- any other handler error: the retry policy (``asya.retry``): a retry, x-sink, or the ``on_exhausted`` chain.

``run`` answers the number of frames on success and ``None`` after an error. A required send that fails raises, so
the record fails (P-ACK-2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from asya import routing
from asya.abi import AbiState, Frame, Handler, HandlerError, error_details
from asya.envelope import Envelope, Reason
from asya.exceptions import EnvelopeParseError, SerializationError
from asya.hop import HopOutput, Ticker
from asya.idempotency import Delivery, HopGuard
from asya.infra import InfraErrors
from asya.outbox import Outbox, Ticket
from asya.reporting import HopRef, Reporter
from asya.retry import Retrier
from asya.timeout import CallGuard, CallLimit, HandlerTimeoutError

__all__ = ["HandlerCall", "Hop", "RecordItem", "pristine_payload"]


# RecordItem and Hop are plain classes, not dataclasses: generating a dataclass's methods costs cold-start time, and
# neither is compared or printed.


class RecordItem:
    """One SQS record of the batch, parsed before any record runs."""

    __slots__ = ("body", "delivery", "envelope", "error", "first_frame", "message_id")

    def __init__(
        self,
        body: str,
        *,
        message_id: str = "",
        envelope: Envelope | None = None,
        error: EnvelopeParseError | None = None,
        delivery: Delivery | None = None,
        first_frame: str | None = None,
    ) -> None:
        self.body = body
        self.message_id = message_id
        self.envelope = envelope
        self.error = error
        self.delivery = Delivery() if delivery is None else delivery
        #: state of the hop's FRAME#0 idempotency item at pre-flight (P-ACK-8)
        self.first_frame = first_frame


class Hop:
    """What the handler call and its outcome need about one record."""

    __slots__ = ("entry", "fly_id", "guard", "item", "limit", "report", "ticket", "trace")

    def __init__(
        self,
        *,
        item: RecordItem,
        entry: Envelope,
        trace: routing.Trace,
        report: HopRef | None,
        fly_id: str | None,
        limit: CallLimit,
        guard: HopGuard,
        ticket: Ticket,
    ) -> None:
        self.item = item
        self.entry = entry
        self.trace = trace
        self.report = report  # the task whose status this hop writes: tracked roots only
        self.fly_id = fly_id  # the task FLY values go to: own id, or the parent's for a child (P-STAT-15)
        self.limit = limit  # T of the handler call (P-TIME-5)
        self.guard = guard  # sends each output of the hop once across deliveries (P-ACK-8)
        self.ticket = ticket  # the hop's frames in the batch's outbox


def pristine_payload(item: RecordItem) -> Any:
    """The input payload as received: the handler may have mutated the parsed object in place."""
    return json.loads(item.body).get("payload")


class HandlerCall:
    """Runs one hop's handler and routes its outcome; one per actor runtime, reused across hops."""

    def __init__(
        self,
        *,
        actor: str,
        now: Callable[[], str],
        monotonic: Callable[[], float],
        ticker: Ticker,
        reporter: Reporter,
        errors: InfraErrors,
        retrier: Retrier,
    ) -> None:
        self._actor = actor
        self._now = now
        self._monotonic = monotonic
        self._ticker = ticker
        self._reporter = reporter
        self._errors = errors
        self._retrier = retrier

    def run(self, handler: Handler, hop: Hop, outbox: Outbox) -> int | None:
        """Run the handler and route its output; the number of frames on success, ``None`` after an error."""
        entry = hop.entry
        fly_id = hop.fly_id
        send_fly = None if fly_id is None else (lambda values: self._reporter.fly(fly_id, entry.id, values))
        output = HopOutput(
            send_frames=lambda frames: outbox.stage(hop.ticket, frames),
            send_fly=send_fly,
            ticker=self._ticker,
            schedule_first=handler.kind in ("generator", "async_generator"),
            monotonic=self._monotonic,
        )

        def on_frame(frame: Frame) -> None:
            # child ids derive from the hop (routing.child_id): a redelivery repeats them (P-ACK-8)
            outgoing = routing.forward_frame(
                entry, frame, frame.index, actor=self._actor, now=self._now(), trace=hop.trace
            )
            output.add_frame(outgoing)

        state = AbiState.from_envelope(entry)
        failure: HandlerError | SerializationError | HandlerTimeoutError | None = None
        try:
            # copy_result=False: a returned plain value is encoded (Outbox.stage) by output.close() below, before any
            # handler code runs again, so it needs no copy
            handler.run(
                entry.payload,
                state,
                on_frame=on_frame,
                on_fly=output.add_fly,
                guard=CallGuard(hop.limit),
                copy_result=False,
            )
        except (HandlerError, SerializationError, HandlerTimeoutError) as exc:
            failure = exc
        outbox.ended(hop.ticket)  # the last frames may wait for the batch's other records
        try:
            frames = output.close()  # frames yielded before an error stay sent (P-ABI-11)
        except SerializationError as exc:
            failure = failure or exc
            frames = 0
        outbox.check(hop.ticket)
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
            hop.guard.send_outcome(out, lambda once: self._errors.send(once[0]))  # once per hop (P-ACK-8)
        return frames

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
            )
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
            )
        else:  # section 8: retry, x-sink or on_exhausted
            self._retrier.handler_error(
                entry, error_details(failure), payload=payload, report=hop.report, trace=hop.trace, guard=hop.guard
            )
