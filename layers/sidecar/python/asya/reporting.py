"""The layer's task-store writes, with the failure rules of PROTOCOL 10.2 and 8.5.

- Running events (``received``, ``processing``, ``completed``) and FLY appends are best effort: a failure is logged
  and never fails the record (P-STAT-7).
- The ``retrying`` event after a scheduled retry is best effort too and does not depend on the progress mode.
- The final ``failed`` write after an infrastructure error or an expired SLA is best effort with 3 tries (P-ERR-6).
- Which running events are written depends on the ``x-asya-progress`` header (P-STAT-19): ``hops`` (default) writes
  one ``processing`` event per hop carrying the ``received`` data; ``detailed`` writes ``received``, ``processing``
  and ``completed``; ``final`` writes none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from asya import headers as hdr
from asya.envelope import Route
from asya.store import FlyValue, TaskStore

__all__ = ["FINAL_TRIES", "HopRef", "ProgressMode", "Reporter"]

FINAL_TRIES: Final = 3
_FINAL_BACKOFF: Final = 0.1


@dataclass(frozen=True, slots=True)
class HopRef:
    """The task a hop reports under and the input route its progress is computed from (P-STAT-8)."""

    task_id: str
    route: Route
    envelope_id: str
    created_at: str | None = None


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

    def processing(self, hop: HopRef, mode: ProgressMode, message_size_kb: float) -> None:
        """Step 13 of P-PROC-2, before the handler call."""
        if mode is ProgressMode.DETAILED:
            self._running(hop, "processing", None)
        elif mode is ProgressMode.HOPS:
            self._running(hop, "processing", {"message_size_kb": message_size_kb})

    def completed(self, hop: HopRef, mode: ProgressMode, duration_ms: int, frames: int) -> None:
        """Step 14 of P-PROC-2, after every frame left: only in ``detailed`` mode."""
        if mode is ProgressMode.DETAILED:
            self._running(hop, "completed", {"duration_ms": duration_ms, "frames": frames})

    def retrying(self, hop: HopRef, *, attempt: int, delay_seconds: int, error: str) -> None:
        """A retry was scheduled (P-RES-8, P-STAT-5); written whatever the progress mode (P-STAT-19)."""
        self._running(hop, "retrying", {"attempt": attempt, "delay_seconds": delay_seconds, "error": error})

    def final_failed(self, hop: HopRef, *, error: str, error_details: Mapping[str, Any] | None) -> None:
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
