"""What the routable crew (x-pause, x-resume) shares on top of :class:`asya_crew.runtime.CrewRuntime`: the layer's
steps that apply to them (P-PROC-2 steps 1, 5, 6, 7 and 11, P-ACK-2, P-CREW-1). The
route check, the pre-flight's verdict and the SLA check are the layer's own (``asya.prehop``).

- a body that does not parse goes to x-sump as ``ParseError`` (P-ERR-4);
- route check (P-ROUTE-1): an envelope for another actor goes to x-sump as ``RouteMismatch``;
- pre-flight (P-STAT-10): :meth:`RoutedCrewRuntime._task_item` reads the task item (strongly consistent);
- SLA check (P-TIME-3): less than 1 s to ``deadline_at``: x-sink with reason ``Timeout``;
- rejection (P-CREW-1): the envelope to x-sink with its route unchanged, phase ``failed``, reason ``RuntimeError``
  and the error payload of P-RES-14, so the task fails with the message;
- a payload reference is read back (P-LARGE-4): ``PayloadUnavailable`` goes to x-sump.

Neither has checkpoints: :meth:`_checkpoint_phase` answers ``None``. Each implements :meth:`_decide`, run on every
parsed envelope; :class:`StopRecord` raised inside it acks the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import prehop, routing
from asya.envelope import Envelope, Reason
from asya.payloads import PayloadUnavailableError, reference_owners
from asya_crew.checkpoint import CheckpointLine
from asya_crew.runtime import CrewRuntime, Parsed

__all__ = ["RoutedCrewRuntime", "StopRecord", "status_of"]


class StopRecord(Exception):  # noqa: N818 - control flow, not an error: the record is decided and acked
    """Raised inside a record's steps once it is decided (sent on or dropped): the record is acked."""


class RoutedCrewRuntime(CrewRuntime):
    """Crew that may appear in routes and runs the regular steps around its logic; clients lazy when not injected."""

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        return None

    def _complete(self, record: SQSRecord, prepared: Parsed, checkpoint: CheckpointLine | None) -> None:
        try:
            self._decide(prepared.envelope)
        except StopRecord:
            return

    def _decide(self, envelope: Envelope) -> None:
        """The crew actor's own steps for one parsed envelope; raising :class:`StopRecord` acks the record."""
        raise NotImplementedError

    def _hop_trace(self, envelope: Envelope) -> routing.Trace:
        return routing.Trace.for_hop(envelope.headers, enabled=self.config.tracing)

    def _check_route(self, envelope: Envelope) -> None:
        """P-ROUTE-1 (``asya.prehop.refusal``): raises :class:`StopRecord` after sending a ``RouteMismatch`` to
        x-sump."""
        self._stop_if(envelope, prehop.refusal(envelope, self.config.actor))

    def _to_sump(self, envelope: Envelope, reason: Reason, message: str) -> NoReturn:
        self._stop(
            envelope,
            prehop.Verdict(f"{reason.value}: sent to x-sump", level="error", reason=reason, message=message),
        )

    def _stop_if(self, envelope: Envelope, verdict: prehop.Verdict | None) -> None:
        if verdict is not None:
            self._stop(envelope, verdict)

    def _stop(self, envelope: Envelope, verdict: prehop.Verdict) -> NoReturn:
        """Apply a pre-hop verdict (``asya.prehop.decide``), then raise :class:`StopRecord`."""
        prehop.decide(
            envelope,
            verdict,
            actor=self.config.actor,
            now=self._now(),
            trace=self._hop_trace(envelope),
            send=lambda out: self._transport.send(out.actor, out.envelope),
            logger=self._log,
            new_id=self._new_id,
        )
        raise StopRecord

    def _reject(self, envelope: Envelope, message: str) -> NoReturn:
        """P-CREW-1: the task fails with ``message`` through x-sink; raises :class:`StopRecord`."""
        out = routing.failure_envelope(
            envelope,
            {"message": message, "type": Reason.RUNTIME_ERROR.value},
            actor=self.config.actor,
            now=self._now(),
            original_payload=envelope.payload,
            trace=self._hop_trace(envelope),
        )
        self._transport.send(out.actor, out.envelope)
        self._log.error("envelope rejected: sent to x-sink", extra={"error": message})
        raise StopRecord

    def _task_item(self, task_id: str) -> dict[str, Any] | None:
        """Pre-flight's read of the task item (P-STAT-10), strongly consistent; ``None`` when there is none."""
        key = self._store.fence_key(task_id, None)
        return self._store.preflight([key]).get((key["pk"]["S"], key["sk"]["S"]))

    def _stop_if_canceled(self, envelope: Envelope, status: str | None) -> None:
        """P-STAT-10: a canceled task's envelope goes to x-sink (which logs and acks it)."""
        if status == "canceled":
            trace = self._hop_trace(envelope)
            self._stop_if(
                envelope, prehop.preflight(envelope, status, actor=self.config.actor, now=self._now(), trace=trace)
            )

    def _check_sla(self, envelope: Envelope) -> None:
        """P-TIME-3 (``asya.prehop.sla``): raises :class:`StopRecord` after sending the envelope to x-sink."""
        deadline = prehop.deadline_of(envelope)
        verdict = prehop.sla(
            envelope, deadline, self._clock(), actor=self.config.actor, trace=self._hop_trace(envelope)
        )
        self._stop_if(envelope, verdict)

    def _payload(self, envelope: Envelope) -> Any:
        """The payload itself (P-LARGE-4); an unreadable reference goes to x-sump (``PayloadUnavailable``)."""
        try:
            return self._payloads.rehydrate(envelope.payload, owners=reference_owners(envelope))
        except PayloadUnavailableError as exc:
            self._to_sump(envelope, Reason.PAYLOAD_UNAVAILABLE, str(exc))


def status_of(item: Mapping[str, Any] | None) -> str | None:
    """The ``status`` of a task item read raw from DynamoDB, ``None`` when there is none."""
    if item is None:
        return None
    value = item.get("status")
    return value.get("S") if isinstance(value, dict) else None
