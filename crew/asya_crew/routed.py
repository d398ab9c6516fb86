"""What the routable crew (x-pause, x-resume) shares on top of :class:`asya_crew.runtime.CrewRuntime`: the layer's
steps that apply to them (P-PROC-2 steps 1, 5, 6, 7 and 11, P-ACK-2, P-CREW-1).

- a body that does not parse goes to x-sump as ``ParseError`` (P-ERR-4);
- route check (P-ROUTE-1): an envelope for another actor goes to x-sump as ``RouteMismatch``;
- pre-flight (P-STAT-10): :meth:`RoutedCrewRuntime._task_item` reads the task item (strongly consistent);
- SLA check (P-TIME-3): less than 1 s to ``deadline_at``: x-sink with reason ``Timeout``;
- rejection (P-CREW-1): the envelope to x-sink with its route unchanged, phase ``failed``, reason ``RuntimeError``
  and the error payload of P-RES-14, so the task fails with the message;
- a payload reference is read back (P-LARGE-4): ``PayloadUnavailable`` goes to x-sump.

Neither has checkpoints: :meth:`_checkpoint_phase` answers ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final, NoReturn

from asya import routing
from asya.envelope import Envelope, Reason
from asya.payloads import PayloadUnavailableError
from asya.timeutil import parse_ts
from asya_crew.runtime import CrewRuntime

__all__ = ["RoutedCrewRuntime", "StopRecord", "status_of"]

_SLA_MARGIN: Final = timedelta(seconds=1)


class StopRecord(Exception):  # noqa: N818 - control flow, not an error: the record is decided and acked
    """Raised inside a record's steps once it is decided (sent on or dropped): the record is acked."""


class RoutedCrewRuntime(CrewRuntime):
    """Crew that may appear in routes and runs the regular steps around its logic; clients lazy when not injected."""

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        return None

    def _hop_trace(self, envelope: Envelope) -> routing.Trace:
        return routing.Trace.for_hop(envelope.headers, enabled=self.config.tracing)

    def _check_route(self, envelope: Envelope) -> None:
        """P-ROUTE-1: raises :class:`StopRecord` after sending a ``RouteMismatch`` to x-sump."""
        mismatch = routing.route_mismatch(envelope, self.config.actor)
        if mismatch is None:
            return
        self._to_sump(envelope, Reason.ROUTE_MISMATCH, mismatch)

    def _to_sump(self, envelope: Envelope, reason: Reason, message: str) -> NoReturn:
        out = routing.sump_envelope(
            reason=reason,
            message=message,
            actor=self.config.actor,
            now=self._now(),
            envelope=envelope,
            trace=self._hop_trace(envelope),
            original_payload=envelope.payload,
            new_id=self._new_id,
        )
        self._transport.send(out.actor, out.envelope)
        self._log.error(f"{reason.value}: sent to x-sump", extra={"error": message})
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
            out = routing.preflight_envelope(
                envelope, status, actor=self.config.actor, now=self._now(), trace=self._hop_trace(envelope)
            )
            self._transport.send(out.actor, out.envelope)
            self._log.info("task is canceled: sent to x-sink")
            raise StopRecord

    def _check_sla(self, envelope: Envelope) -> None:
        """P-TIME-3: less than 1 s to ``deadline_at``: x-sink with reason ``Timeout``; raises :class:`StopRecord`."""
        deadline = parse_ts(envelope.status.deadline_at) if envelope.status is not None else None
        if deadline is None or deadline - self._clock() >= _SLA_MARGIN:
            return
        out = routing.sla_envelope(envelope, actor=self.config.actor, now=self._now(), trace=self._hop_trace(envelope))
        self._transport.send(out.actor, out.envelope)
        self._log.warning("SLA deadline expired: sent to x-sink")
        raise StopRecord

    def _payload(self, envelope: Envelope) -> Any:
        """The payload itself (P-LARGE-4); an unreadable reference goes to x-sump (``PayloadUnavailable``)."""
        try:
            return self._payloads.rehydrate(envelope.payload)
        except PayloadUnavailableError as exc:
            self._to_sump(envelope, Reason.PAYLOAD_UNAVAILABLE, str(exc))


def status_of(item: Mapping[str, Any] | None) -> str | None:
    """The ``status`` of a task item read raw from DynamoDB, ``None`` when there is none."""
    if item is None:
        return None
    value = item.get("status")
    return value.get("S") if isinstance(value, dict) else None
