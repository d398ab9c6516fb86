"""Infrastructure errors of the layer (P-ERR-4..6, P-ENV-9..12, P-ROUTE-8).

Each one sends an x-sump envelope first. That send is required: when it fails the exception propagates and the
record fails, so SQS delivers it again (P-ERR-5: acked only after the x-sump send succeeded). A tracked envelope then
gets a best-effort final ``failed`` status (P-ERR-6); when the reporter cannot write it (the HTTP reporter, GW-EVT-3)
 the x-sump envelope asks x-sump to (P-SUMP-6, ``asya.routing.sump_writes_final``). No AWS resources are
created here; the transport and the reporter come from the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from aws_lambda_powertools import Logger

from asya import logkeys, routing
from asya.envelope import Envelope, Reason, salvage_envelope
from asya.reporting import HopRef, Reporter
from asya.transport import Prepared, Transport, UnknownActorError

__all__ = ["LOST_FRAME", "RAW_BODY_LIMIT", "InfraErrors", "ends_lineage", "parse_failure_envelope"]

#: P-ERR-4: ``details.raw_body`` of a body that did not parse keeps at most this many bytes.
RAW_BODY_LIMIT: Final = 64 * 1024
#: ``status.error`` member of the x-sump envelope of a frame lost to an unknown destination (P-ROUTE-8) that is not
#: the input's own lineage: the envelope carries the input's id, whose lineage goes on (its value: the frame's id).
LOST_FRAME: Final = "lost_frame"


class InfraErrors:
    """Routes one actor's infrastructure errors to x-sump and reports the task failed."""

    def __init__(
        self,
        *,
        actor: str,
        transport: Transport,
        reporter: Reporter,
        logger: Logger,
        new_id: Callable[[], str],
        tracing: bool,
    ) -> None:
        self._actor = actor
        self._transport = transport
        self._reporter = reporter
        self._log = logger
        self._new_id = new_id
        self._tracing = tracing

    def send(self, outgoing: routing.Outgoing) -> None:
        """A required send: any failure propagates and fails the record (P-ACK-2)."""
        self._transport.send(outgoing.actor, outgoing.envelope)

    def send_notice(self, outgoing: routing.Outgoing, *, frames_sent: int) -> None:
        """A partial-failure notice to x-sump (P-RES-10): required like any x-sump send, never a final status."""
        self.send(outgoing)
        status = outgoing.envelope.status
        self._log.warning(
            "handler failed after yielding frames: frames sent, notice sent to x-sump",
            extra={"reason": status.reason if status else None, "frames_sent": frames_sent},
        )

    def report(
        self,
        reason: Reason,
        message: str,
        env: Envelope,
        report: HopRef | None,
        now: str,
        *,
        original_payload: Any,
        trace: routing.Trace,
        details: Mapping[str, Any] | None = None,
        writer_id: str | None = None,
    ) -> None:
        """x-sump first (required), then the best-effort final status (P-ERR-6), tagged with ``writer_id`` (the
        record's message id) so that its error details reach the result item."""
        extra = {k: v for k, v in (details or {}).items() if k not in ("message", "type")}
        out = routing.sump_envelope(
            reason=reason,
            message=message,
            actor=self._actor,
            now=now,
            envelope=env,
            trace=trace,
            original_payload=original_payload,
            details=extra,
            final_by_sump=report is not None and not self._reporter.writes_final,
        )
        self.send(out)
        self._log.error("infrastructure error: sent to x-sump", extra={"reason": reason.value, "error": message})
        if report is not None:
            self._reporter.final_failed(
                report, error=message, error_details={"message": message, "type": reason.value}, writer_id=writer_id
            )

    def parse_failure(self, body: str, error: Exception, now: str) -> None:
        """A body that is not an envelope (P-ENV-9..12): x-sump with ``details.raw_body``."""
        out = parse_failure_envelope(
            body, error, actor=self._actor, now=now, new_id=self._new_id, tracing=self._tracing
        )
        status = out.envelope.status
        logkeys.update(correlation_id=out.envelope.id, attempt=status.attempt if status else 1, phase="failed")
        self.send(out)
        self._log.error("body is not a valid envelope: sent to x-sump", extra={"error": str(error)})

    def unknown_destinations(
        self,
        unknown: Sequence[tuple[Prepared, UnknownActorError]],
        *,
        entry: Envelope,
        report: HopRef | None,
        now: str,
        trace: routing.Trace,
    ) -> None:
        """Frames of a hop whose destination has no queue (the outbox's, ``asya.outbox``): each one's x-sump envelope,
        required (P-ROUTE-8)."""
        sump_fails_task = report is not None and not self._reporter.writes_final
        sumps = [
            routing.sump_envelope(
                reason=Reason.UNKNOWN_ACTOR,
                message=str(error),
                actor=self._actor,
                now=now,
                envelope=entry,
                trace=trace,
                original_payload=frame.envelope.payload,
                final_by_sump=sump_fails_task and frame.envelope.id == entry.id,
                error_extra=None if frame.envelope.id == entry.id else {LOST_FRAME: frame.envelope.id},
            )
            for frame, error in unknown
        ]
        for result in self._transport.send_batch([(s.actor, s.envelope) for s in sumps]):
            if result.error is not None:
                raise result.error
        self._log.error(
            "unknown destination: frame sent to x-sump",
            extra={"envelope_id": entry.id, "actors": [o.actor for o, _ in unknown]},
        )
        lineage = [error for frame, error in unknown if frame.envelope.id == entry.id]
        if report is not None and lineage:
            # frame 0 carries the task (P-FAN-6): it can no longer complete; a lost child does not fail it
            message = str(lineage[0])
            details = {"message": message, "type": Reason.UNKNOWN_ACTOR.value}
            self._reporter.final_failed(report, error=message, error_details=details)


def ends_lineage(envelope: Envelope) -> bool:
    """True when the failure of this x-sump envelope ended the lineage of its ``id`` (x-sump then finishes a fan-out
    child, P-SUMP-7). False for a partial-failure notice, whose frames went on (P-RES-10: reason
    ``PartialFailure``, or ``status.error.frames_sent``), and for a lost frame other than the input's own
    (:data:`LOST_FRAME`)."""
    status = envelope.status
    if status is None or status.reason == Reason.PARTIAL_FAILURE.value:
        return False
    error = status.error
    return not (isinstance(error, Mapping) and ("frames_sent" in error or LOST_FRAME in error))


def parse_failure_envelope(
    body: str, error: Exception, *, actor: str, now: str, new_id: Callable[[], str], tracing: bool
) -> routing.Outgoing:
    """The x-sump envelope of a body that is not an envelope (P-ENV-9..12, P-ERR-4): the input's id, route, headers,
    parent_id and status as far as each is valid on its own (``salvage_envelope``), no ``original_payload``, and
    ``details.raw_body`` with at most :data:`RAW_BODY_LIMIT` bytes of the body."""
    known = salvage_envelope(body, new_id=new_id, unknown_route=routing.unknown_route)
    return routing.sump_envelope(
        reason=Reason.PARSE_ERROR,
        message=str(error),
        actor=actor,
        now=now,
        envelope=known,
        trace=routing.Trace.for_hop(known.headers, enabled=tracing),
        details={"raw_body": _truncate(body, RAW_BODY_LIMIT)},
    )


def _truncate(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")
