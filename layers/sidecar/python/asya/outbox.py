"""The frames of one SQS batch, sent together (P-ROUTE-9, P-ROUTE-10, P-ACK-2, P-ACK-3, P-RES-10).

One :class:`Outbox` per batch; each record whose handler runs gets a :class:`Ticket`. The hop's ``asya.hop.HopOutput``
hands its groups of frames to :meth:`Outbox.stage`, which resolves and encodes them (``Transport.prepare``: an
oversized or unencodable frame raises ``SerializationError`` in the record that produced it, before anything of that
group is sent) and queues them tagged with their ticket. Queued frames leave through ``Transport.send_prepared``
(``SendMessageBatch`` per destination queue, at most 10 entries and 1 MiB per call):

- at once while the record's handler still runs (``Ticket.running``): the hop's own 1 s / 10-frame rules already
  applied, so a long-running generator streams, and frames of earlier records waiting in the outbox go along;
- as soon as 10 frames wait for one queue;
- no later than :data:`asya.hop.FRAME_MAX_WAIT` after the oldest waiting one was queued (served by the runtime's
  ``Ticker``, also while a later record's handler is busy);
- at :meth:`Outbox.finish`, the end of the batch.

Frame 0 leaves last (P-ROUTE-9): the frame that keeps the input id (the task's own lineage, whose next hop raises the
task's fence) is held by its ticket until :meth:`Outbox.release_first`, which the hop calls once its call ended and
any x-sump notice left (P-RES-10). The release first sends every other frame of the ticket still waiting; only if
they all left is frame 0 queued, and from then on it batches like any frame (it may share a ``SendMessageBatch`` with
other records' frames). So a child whose send failed is never stranded behind a task that moved on: the record fails,
frame 0 was never sent, and the redelivery runs the hop again (child ids are deterministic, P-FAN-2, so children that
did leave are absorbed by their own fences). A batch of one-frame records to one next actor costs one
``SendMessageBatch``.

``continuation``, set for an actor that compiled flows call (P-FLOW-4), maps each staged frame to what the
flow does next (``asya.flows.mesh.continue_outgoing``) before it is encoded: a frame that ends its route becomes the
next route segment, the fan-out slices or the final envelope; a slice 0 keeps the input id and is held as frame 0.

Failures stay with their record: an entry still failing after the transport's retries fails only its ticket (its
other frames stay sent). An unknown destination is passed to the ticket's ``on_unknown`` (x-sump, P-ROUTE-8); if that
raises, the ticket fails. A failed ticket refuses its later frames (``stage`` raises the failure, so the hop sends
nothing more) and never sends its frame 0. :meth:`Outbox.when_sent` callbacks run once every frame of a released
ticket left (the ``completed`` event, P-PROC-2 step 14). :meth:`Outbox.finish` flushes and returns the record ids of
the failed tickets, for ``batchItemFailures``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from asya.hop import FRAME_BATCH, FRAME_MAX_WAIT, Ticker
from asya.routing import Outgoing
from asya.transport import Prepared, SendResult, Transport, TransportError, UnknownActorError

__all__ = ["Outbox", "Ticket", "UnknownHandler"]

#: Called with the frames of one ticket whose destination has no queue; raising fails the ticket.
UnknownHandler = Callable[[list[tuple[Outgoing, UnknownActorError]]], None]


# Ticket and _Queued are plain classes, not dataclasses: generating a dataclass's methods costs cold-start time, and
# neither is compared (a ticket is found by identity) or printed.


class Ticket:
    """One record's share of the outbox."""

    __slots__ = ("callbacks", "error", "first", "first_id", "on_unknown", "queued", "record_id", "released", "running")

    def __init__(self, *, record_id: str, first_id: str, on_unknown: UnknownHandler) -> None:
        self.record_id = record_id
        self.first_id = first_id  # frame 0 keeps the input id (P-FAN-2)
        self.on_unknown = on_unknown
        self.running = True  # the handler call is in progress: its frames leave at once
        self.released = False  # frame 0 may leave (P-ROUTE-9)
        self.error: BaseException | None = None
        self.queued = 0
        self.first: list[_Queued] = []
        self.callbacks: list[Callable[[], None]] = []


class _Queued:
    __slots__ = ("at", "outgoing", "prepared", "ticket")

    def __init__(self, ticket: Ticket, outgoing: Outgoing, prepared: Prepared, at: float) -> None:
        self.ticket = ticket
        self.outgoing = outgoing
        self.prepared = prepared
        self.at = at  # monotonic time it was queued


class Outbox:
    """The frames of one SQS batch. Thread-safe: the ticker thread flushes concurrently with the records."""

    def __init__(
        self,
        *,
        transport: Transport,
        ticker: Ticker | None,
        monotonic: Callable[[], float] = time.monotonic,
        logger: logging.Logger | Any = None,
        continuation: Callable[[Outgoing], list[Outgoing]] | None = None,
    ) -> None:
        self._transport = transport
        self._continuation = continuation
        self._ticker = ticker
        self._monotonic = monotonic
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._lock = threading.RLock()
        self._queue: list[_Queued] = []
        self._tickets: list[Ticket] = []

    def ticket(self, record_id: str, first_id: str, on_unknown: UnknownHandler) -> Ticket:
        with self._lock:
            ticket = Ticket(record_id=record_id, first_id=first_id, on_unknown=on_unknown)
            self._tickets.append(ticket)
            return ticket

    def stage(self, ticket: Ticket, frames: Sequence[Outgoing]) -> None:
        """Queue the next frames of ``ticket``'s hop; raises the ticket's failure (see the module docstring)."""
        with self._lock:
            if ticket.error is not None:
                raise ticket.error
            if self._continuation is not None:  # a compiled flow goes on where a frame ends its route (P-FLOW-4)
                frames = [out for frame in frames for out in self._continuation(frame)]
            prepared = [self._transport.prepare(o.actor, o.envelope) for o in frames]
            now = self._monotonic()
            for outgoing, item in zip(frames, prepared, strict=True):
                queued = _Queued(ticket, outgoing, item, now)
                if outgoing.envelope.id == ticket.first_id and not ticket.released:
                    ticket.first.append(queued)
                else:
                    self._queue.append(queued)
                    ticket.queued += 1
            if ticket.running:
                self._flush(list(self._queue))
            else:
                self._flush_full()
            self._schedule()
            if ticket.error is not None:
                raise ticket.error

    def ended(self, ticket: Ticket) -> None:
        """The handler call of ``ticket`` returned: its remaining frames may wait for the other records'."""
        with self._lock:
            ticket.running = False

    def release_first(self, ticket: Ticket) -> None:
        """Let frame 0 of ``ticket`` leave (P-ROUTE-9): first every other frame of the ticket still waiting is sent,
        then, if none failed, frame 0 is queued and batches like any frame. Raises the ticket's failure."""
        with self._lock:
            if ticket.error is None:
                self._flush([q for q in self._queue if q.ticket is ticket])
            if ticket.error is not None:
                ticket.first.clear()
                raise ticket.error
            ticket.released = True
            first, ticket.first = ticket.first, []
            now = self._monotonic()
            for queued in first:
                queued.at = now
            self._queue.extend(first)
            ticket.queued += len(first)
            self._flush_full()
            self._schedule()
            if ticket.queued == 0:
                self._run_callbacks(ticket)
            if ticket.error is not None:
                raise ticket.error

    def check(self, ticket: Ticket) -> None:
        """Raise ``ticket``'s failure, if any."""
        with self._lock:
            if ticket.error is not None:
                raise ticket.error

    def when_sent(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        """Run ``callback`` once every frame of the released ``ticket`` left (now if none waits); never after a
        failure."""
        with self._lock:
            if ticket.error is not None:
                return
            if ticket.queued or not ticket.released:
                ticket.callbacks.append(callback)
                return
        callback()

    def flush_due(self) -> None:
        """Send everything once the oldest queued frame waited :data:`FRAME_MAX_WAIT`; called by the ticker."""
        with self._lock:
            if self._queue and self._monotonic() >= min(q.at for q in self._queue) + FRAME_MAX_WAIT:
                self._flush(list(self._queue))
            self._schedule()

    def finish(self) -> list[str]:
        """Send everything still queued; the record ids of the tickets that failed, in batch order. A frame 0 never
        released (its record failed first) is never sent."""
        if self._ticker is not None:
            self._ticker.cancel(self)
        with self._lock:
            self._flush(list(self._queue))
            return [t.record_id for t in self._tickets if t.error is not None]

    def failure(self, record_id: str) -> BaseException | None:
        """Why the ticket of ``record_id`` failed, if it did."""
        with self._lock:
            return next((t.error for t in self._tickets if t.record_id == record_id and t.error is not None), None)

    def _flush_full(self) -> None:
        counts: dict[str, int] = {}
        for queued in self._queue:
            counts[queued.prepared.url] = counts.get(queued.prepared.url, 0) + 1
        full = {url for url, count in counts.items() if count >= FRAME_BATCH}
        if full:
            self._flush([q for q in self._queue if q.prepared.url in full])

    def _schedule(self) -> None:
        if self._queue and self._ticker is not None:
            self._ticker.schedule(self, min(q.at for q in self._queue) + FRAME_MAX_WAIT)

    def _flush(self, entries: list[_Queued]) -> None:
        if not entries:
            return
        chosen = {id(q) for q in entries}
        self._queue = [q for q in self._queue if id(q) not in chosen]
        try:
            results = self._transport.send_prepared([q.prepared for q in entries])
        except Exception as exc:  # unexpected: every frame of the group counts as failed, their records fail
            failure = TransportError(f"SendMessageBatch failed: {exc}")
            results = [SendResult(actor=q.prepared.actor, failure=failure) for q in entries]
        unknown: dict[Ticket, list[tuple[_Queued, UnknownActorError]]] = {}
        for queued, result in zip(entries, results, strict=True):
            ticket = queued.ticket
            ticket.queued -= 1
            if result.failure is not None:
                ticket.error = ticket.error or result.failure
            elif result.error is not None:
                unknown.setdefault(ticket, []).append((queued, result.error))
        for ticket, lost in unknown.items():
            try:
                ticket.on_unknown([(q.outgoing, error) for q, error in lost])
            except Exception as exc:  # the x-sump send is required (P-ERR-5): the record fails
                ticket.error = ticket.error or exc
        for ticket in {q.ticket: None for q in entries}:
            if ticket.queued == 0 and ticket.released and ticket.error is None:
                self._run_callbacks(ticket)

    def _run_callbacks(self, ticket: Ticket) -> None:
        callbacks, ticket.callbacks = ticket.callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:  # only best-effort writes are deferred here (P-STAT-7)
                self._log.warning("deferred status write failed", extra={"error": str(exc)})
