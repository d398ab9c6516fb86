"""The frames of one SQS batch, sent together (PROTOCOL P-ROUTE-9, P-ROUTE-10, P-ACK-2, P-ACK-3, P-ACK-8).

One :class:`Outbox` per batch; each record whose handler runs gets a :class:`Ticket`. The hop's ``asya.hop.HopOutput``
hands its groups of frames to :meth:`Outbox.stage`, which numbers them and leaves out what an earlier delivery sent
(``HopGuard.admit``, P-ACK-8), resolves and encodes them (``Transport.prepare``: an oversized or unencodable frame
raises ``SerializationError`` in the record that produced it, before anything of that group is sent) and queues them
tagged with their ticket. Queued frames leave through ``Transport.send_prepared`` (``SendMessageBatch`` per destination
queue, at most 10 entries and 1 MiB per call):

- at once while the record's handler still runs (``Ticket.running``): the hop's own 1 s / 10-frame rules already
  applied, so a long-running generator streams, and frames of earlier records waiting in the outbox go along;
- as soon as 10 frames wait for one queue;
- no later than :data:`asya.hop.FRAME_MAX_WAIT` after the oldest waiting one was queued (served by the runtime's
  ``Ticker``, also while a later record's handler is busy);
- at :meth:`Outbox.finish`, the end of the batch.

So a batch of one-frame records to one next actor costs one ``SendMessageBatch`` and, after it, one ``BatchWriteItem``
for the idempotency items of all of them (``Idempotency.mark_sent_all``); items are written only for frames whose
send succeeded.

Failures stay with their record: an entry still failing after the transport's retries fails only its ticket (its
other frames stay sent and marked; this run's claims on the failed ones are released). An unknown destination is
passed to the ticket's ``on_unknown`` (x-sump, P-ROUTE-8); if that raises, the ticket fails. Frames another live run
holds fail the ticket with ``DuplicateInFlightError`` once its other frames are queued. A failed ticket refuses its
later frames (``stage`` raises the failure, so the hop sends nothing more). :meth:`Outbox.when_sent` callbacks run once
every frame of a finished ticket left (the ``completed`` event, P-PROC-2 step 14). :meth:`Outbox.finish` flushes and
returns the record ids of the failed tickets, for ``batchItemFailures``. A ticket for a hop that already has one in
the batch (SQS put two copies of a message in it) first flushes the outbox, so the later copy finds the earlier one's
items, as when every record sent its own frames.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from asya.hop import FRAME_BATCH, FRAME_MAX_WAIT, Ticker
from asya.idempotency import HopGuard, HopKey, Idempotency
from asya.routing import Outgoing
from asya.transport import Prepared, SendResult, Transport, TransportError, UnknownActorError

__all__ = ["Outbox", "Ticket", "UnknownHandler"]

#: Called with the frames of one ticket whose destination has no queue; raising fails the ticket.
UnknownHandler = Callable[[list[tuple[Outgoing, UnknownActorError]]], None]


# Ticket and _Queued are plain classes, not dataclasses: generating a dataclass's methods costs cold-start time, and
# neither is compared (a ticket is found by identity) or printed.


class Ticket:
    """One record's share of the outbox."""

    __slots__ = ("callbacks", "error", "guard", "on_unknown", "queued", "record_id", "running")

    def __init__(self, *, record_id: str, guard: HopGuard, on_unknown: UnknownHandler) -> None:
        self.record_id = record_id
        self.guard = guard
        self.on_unknown = on_unknown
        self.running = True  # the handler call is in progress: its frames leave at once
        self.error: BaseException | None = None
        self.queued = 0
        self.callbacks: list[Callable[[], None]] = []


class _Queued:
    __slots__ = ("at", "index", "outgoing", "prepared", "ticket")

    def __init__(self, ticket: Ticket, index: int, outgoing: Outgoing, prepared: Prepared, at: float) -> None:
        self.ticket = ticket
        self.index = index  # the frame's index in its hop (P-ACK-8)
        self.outgoing = outgoing
        self.prepared = prepared
        self.at = at  # monotonic time it was queued


class Outbox:
    """The frames of one SQS batch. Thread-safe: the ticker thread flushes concurrently with the records."""

    def __init__(
        self,
        *,
        transport: Transport,
        ledger: Idempotency,
        ticker: Ticker | None,
        monotonic: Callable[[], float] = time.monotonic,
        logger: logging.Logger | Any = None,
    ) -> None:
        self._transport = transport
        self._ledger = ledger
        self._ticker = ticker
        self._monotonic = monotonic
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._lock = threading.RLock()
        self._queue: list[_Queued] = []
        self._tickets: list[Ticket] = []
        self._hops: set[HopKey] = set()

    def ticket(self, record_id: str, guard: HopGuard, on_unknown: UnknownHandler) -> Ticket:
        with self._lock:
            if guard.key in self._hops:
                # a second copy of one message in the batch: it must find the first copy's items (P-ACK-8)
                self._flush(list(self._queue))
            ticket = Ticket(record_id=record_id, guard=guard, on_unknown=on_unknown)
            self._tickets.append(ticket)
            self._hops.add(guard.key)
            return ticket

    def stage(self, ticket: Ticket, frames: Sequence[Outgoing]) -> None:
        """Queue the next frames of ``ticket``'s hop; raises the ticket's failure (see the module docstring)."""
        with self._lock:
            if ticket.error is not None:
                raise ticket.error
            admitted, held = ticket.guard.admit(frames)
            try:
                prepared = [self._transport.prepare(o.actor, o.envelope) for _, o in admitted]
            except BaseException:
                ticket.guard.release([index for index, _ in admitted])
                raise
            now = self._monotonic()
            self._queue.extend(
                _Queued(ticket, index, outgoing, item, now)
                for (index, outgoing), item in zip(admitted, prepared, strict=True)
            )
            ticket.queued += len(admitted)
            if held:
                ticket.error = ticket.guard.held_error(held)
            if ticket.running:
                self._flush(list(self._queue))
            else:
                counts: dict[str, int] = {}
                for queued in self._queue:
                    counts[queued.prepared.url] = counts.get(queued.prepared.url, 0) + 1
                full = {url for url, count in counts.items() if count >= FRAME_BATCH}
                if full:
                    self._flush([q for q in self._queue if q.prepared.url in full])
            self._schedule()
            if ticket.error is not None:
                raise ticket.error

    def ended(self, ticket: Ticket) -> None:
        """The handler call of ``ticket`` returned: its remaining frames may wait for the other records'."""
        with self._lock:
            ticket.running = False

    def check(self, ticket: Ticket) -> None:
        """Raise ``ticket``'s failure, if any."""
        with self._lock:
            if ticket.error is not None:
                raise ticket.error

    def when_sent(self, ticket: Ticket, callback: Callable[[], None]) -> None:
        """Run ``callback`` once every queued frame of ``ticket`` left (now if none waits); never after a failure."""
        with self._lock:
            if ticket.error is not None:
                return
            if ticket.queued:
                ticket.callbacks.append(callback)
                return
        callback()

    def flush_due(self) -> None:
        """Send everything once the oldest queued frame waited :data:`FRAME_MAX_WAIT`; called by the ticker."""
        with self._lock:
            if self._queue and self._monotonic() >= self._queue[0].at + FRAME_MAX_WAIT:
                self._flush(list(self._queue))
            self._schedule()

    def finish(self) -> list[str]:
        """Send everything still queued; the record ids of the tickets that failed, in batch order."""
        if self._ticker is not None:
            self._ticker.cancel(self)
        with self._lock:
            self._flush(list(self._queue))
            return [t.record_id for t in self._tickets if t.error is not None]

    def failure(self, record_id: str) -> BaseException | None:
        """Why the ticket of ``record_id`` failed, if it did."""
        with self._lock:
            return next((t.error for t in self._tickets if t.record_id == record_id and t.error is not None), None)

    def _schedule(self) -> None:
        if self._queue and self._ticker is not None:
            self._ticker.schedule(self, self._queue[0].at + FRAME_MAX_WAIT)

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
        sent: dict[Ticket, list[int]] = {}
        failed: dict[Ticket, list[int]] = {}
        unknown: dict[Ticket, list[tuple[_Queued, UnknownActorError]]] = {}
        for queued, result in zip(entries, results, strict=True):
            ticket = queued.ticket
            ticket.queued -= 1
            if result.failure is not None:
                failed.setdefault(ticket, []).append(queued.index)
                ticket.error = ticket.error or result.failure
            elif result.error is not None:
                unknown.setdefault(ticket, []).append((queued, result.error))
            else:
                sent.setdefault(ticket, []).append(queued.index)
        for ticket, lost in unknown.items():
            try:
                ticket.on_unknown([(q.outgoing, error) for q, error in lost])
            except Exception as exc:  # the x-sump send is required (P-ERR-5): the record fails
                ticket.error = ticket.error or exc
                failed.setdefault(ticket, []).extend(q.index for q, _ in lost)
                continue
            sent.setdefault(ticket, []).extend(q.index for q, _ in lost)
        for ticket, indexes in failed.items():
            ticket.guard.release(indexes)
        self._ledger.mark_sent_all([(ticket.guard.key, indexes) for ticket, indexes in sent.items()])
        for ticket in {q.ticket: None for q in entries}:
            if ticket.queued == 0 and not ticket.running and ticket.error is None:
                self._run_callbacks(ticket)

    def _run_callbacks(self, ticket: Ticket) -> None:
        callbacks, ticket.callbacks = ticket.callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:  # only best-effort writes are deferred here (P-STAT-7)
                self._log.warning("deferred status write failed", extra={"error": str(exc)})
