"""The layer's task-store writes, with the failure rules of P-STAT-7, P-ERR-6 and P-ACK-2.

- The hop claim (P-ACK-8) is durable: :meth:`Reporter.claim` raises on a write error, so the record fails. For a
  tracked root under progress ``hops`` (default) or ``detailed`` the claim is the hop's ``processing`` status, in the
  same write (P-STAT-19); under ``final``, and for a fan-out child (on its child item), it stores fence and lease only.
- ``received`` and ``completed`` (progress ``detailed`` only) and FLY appends are best effort: a failure is logged and
  never fails the record (P-STAT-7).
- After a scheduled retry, :meth:`Reporter.retrying` writes the ``retrying`` status (tracked roots, whatever the
  progress mode) and the retry's fence ``(h, n + 1)`` with ``lease_until = 0`` in the same write, on the condition
  that the stored fence is ``(h, n)`` (P-RES-8); fence items without a status get the fence write alone. Up to 3
  tries; the record is acked either way.
- :meth:`Reporter.release` gives up this run's lease when its record fails without a crash (P-ACK-8), best effort.
- The final ``failed`` write after an infrastructure error or an expired SLA is best effort with 3 tries (P-ERR-6).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final

from asya import headers as hdr
from asya.envelope import Route
from asya.store import ApplyResult, FlyValue, TaskStore

__all__ = ["FINAL_TRIES", "Fence", "HopRef", "ProgressMode", "Reporter"]

FINAL_TRIES: Final = 3
_FINAL_BACKOFF: Final = 0.1


@dataclass(frozen=True, slots=True)
class HopRef:
    """The task a hop reports under and the input route its progress is computed from (P-STAT-8)."""

    task_id: str
    route: Route
    envelope_id: str
    created_at: str | None = None


@dataclass(frozen=True, slots=True)
class Fence:
    """A fenced envelope's hop (P-ACK-8): its fence item (the task item of ``envelope_id``, or its child item under
    ``parent_id``) and the fence ``(hop, attempt)``."""

    envelope_id: str
    parent_id: str | None
    hop: int
    attempt: int

    @property
    def value(self) -> tuple[int, int]:
        return (self.hop, self.attempt)


class ProgressMode(StrEnum):
    """Progress detail (P-STAT-19)."""

    HOPS = "hops"
    DETAILED = "detailed"
    FINAL = "final"

    @classmethod
    def of(cls, headers: Mapping[str, Any]) -> ProgressMode:
        value = headers.get(hdr.PROGRESS)
        if value == "detailed":
            return cls.DETAILED
        if value == "final":
            return cls.FINAL
        return cls.HOPS


class Reporter:
    """Best-effort status, progress and FLY writes of one actor."""

    #: Whether :meth:`final_failed` can write the final status. The HTTP reporter cannot (GW-EVT-3): its
    #: x-sump envelopes then ask x-sump to write it (P-SUMP-6, ``asya.routing.sump_writes_final``).
    writes_final: ClassVar[bool] = True

    def __init__(
        self,
        store: TaskStore,
        *,
        actor: str,
        logger: logging.Logger | Any,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._actor = actor
        self._log = logger
        self._sleep = sleep

    def received(self, hop: HopRef, mode: ProgressMode, message_size_kb: float) -> None:
        """Step 9 of P-PROC-2: only in ``detailed`` mode (``hops`` folds it into ``processing``)."""
        if mode is ProgressMode.DETAILED:
            self._running(hop, "received", {"message_size_kb": message_size_kb})

    def claim(
        self,
        fence: Fence,
        hop: HopRef | None,
        mode: ProgressMode,
        *,
        lease_until: int,
        message_size_kb: float,
        history: tuple[str, str | None] | None = None,
    ) -> ApplyResult:
        """Step 13 of P-PROC-2: claim the hop before the handler call (P-ACK-8); raises on a write error. The same
        write stores the run history's chain head ``history`` when given (P-HIST-4)."""
        claim = (fence.hop, fence.attempt, lease_until)
        if hop is not None and mode is not ProgressMode.FINAL:
            route = hop.route
            self._log.debug("hop claimed", extra={"message_size_kb": message_size_kb})
            return self._store.running(
                hop.task_id,
                step="processing",
                actor=route.curr or self._actor,  # the logical name under a route override (P-ROUTE-7)
                route_prev=route.prev,
                route_curr=route.curr,
                route_next=route.next,
                envelope_id=hop.envelope_id,
                created_at=hop.created_at,
                detailed=mode is ProgressMode.DETAILED,
                claim=claim,
                history=history,
            )
        return self._store.claim_fence(
            fence.envelope_id, fence.parent_id, claim=claim, actor=self._actor, history=history
        )

    def release(self, fence: Fence) -> None:
        """Give up this run's lease (P-ACK-8): its record failed, and its redelivery must not wait for the lease."""
        try:
            self._store.release_lease(fence.envelope_id, fence.parent_id, fence.value)
        except Exception as exc:  # best effort by contract (P-ACK-8)
            self._log.warning("lease release failed", extra={"envelope_id": fence.envelope_id, "error": str(exc)})

    def completed(self, hop: HopRef, mode: ProgressMode, duration_ms: int, frames: int) -> None:
        """Step 14 of P-PROC-2, after every frame left: only in ``detailed`` mode."""
        if mode is ProgressMode.DETAILED:
            self._running(hop, "completed", {"duration_ms": duration_ms, "frames": frames})

    def retrying(
        self, hop: HopRef | None, fence: Fence | None, *, attempt: int, delay_seconds: int, error: str
    ) -> None:
        """A retry was scheduled (P-RES-8, P-STAT-5): the ``retrying`` status of a tracked root, whatever the progress
        mode (P-STAT-19), and the fence ``(h, n + 1)`` on the fence item, in one write, up to 3 tries."""
        for attempt_no in range(1, FINAL_TRIES + 1):
            try:
                if hop is not None:
                    route = hop.route
                    self._store.running(
                        hop.task_id,
                        step="retrying",
                        actor=route.curr or self._actor,
                        route_prev=route.prev,
                        route_curr=route.curr,
                        route_next=route.next,
                        extra={"attempt": attempt, "delay_seconds": delay_seconds, "error": error},
                        envelope_id=hop.envelope_id,
                        created_at=hop.created_at,
                        refence=fence.value if fence is not None else None,
                    )
                elif fence is not None:
                    self._store.advance_fence(fence.envelope_id, fence.parent_id, fence.value, error=error)
                return
            except Exception as exc:  # the retry is sent: the record is acked either way (P-RES-8)
                self._log.warning("retrying write failed", extra={"try": attempt_no, "error": str(exc)})
                if attempt_no < FINAL_TRIES:
                    self._sleep(_FINAL_BACKOFF * attempt_no)

    def final_failed(
        self, hop: HopRef, *, error: str, error_details: Mapping[str, Any] | None, writer_id: str | None = None
    ) -> None:
        """The final ``failed`` status after an infrastructure error or an expired SLA (P-ERR-6, P-TIME-3)."""
        for attempt in range(1, FINAL_TRIES + 1):
            try:
                self._store.report_final(
                    hop.task_id,
                    status="failed",
                    error=error,
                    error_details=dict(error_details) if error_details is not None else None,
                    failed_actor=self._actor,
                    envelope_id=hop.envelope_id,
                    created_at=hop.created_at,
                    writer_id=writer_id,
                )
                return
            except Exception as exc:  # best effort by contract (P-ERR-6): logged, the ack does not change
                self._log.warning(
                    "final status write failed", extra={"task_id": hop.task_id, "try": attempt, "error": str(exc)}
                )
                if attempt < FINAL_TRIES:
                    self._sleep(_FINAL_BACKOFF * attempt)

    def fly(self, task_id: str, envelope_id: str, values: Sequence[Any]) -> None:
        """Append buffered FLY values to the task's event log (P-STAT-15..17)."""
        try:
            self._store.append_fly(
                task_id, [FlyValue(payload=v, actor=self._actor, envelope_id=envelope_id) for v in values]
            )
        except Exception as exc:  # best effort (P-STAT-7)
            self._log.warning("FLY append failed", extra={"task_id": task_id, "count": len(values), "error": str(exc)})

    def _running(self, hop: HopRef, step: str, extra: dict[str, Any] | None) -> None:
        route = hop.route
        try:
            self._store.report_running(
                hop.task_id,
                detailed=True,
                step=step,
                actor=route.curr or self._actor,  # the logical name under a route override (P-ROUTE-7)
                route_prev=route.prev,
                route_curr=route.curr,
                route_next=route.next,
                extra=extra,
                envelope_id=hop.envelope_id,
                created_at=hop.created_at,
            )
        except Exception as exc:  # best effort (P-STAT-7)
            self._log.warning("progress write failed", extra={"task_id": hop.task_id, "step": step, "error": str(exc)})
