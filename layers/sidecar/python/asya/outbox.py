"""What the hops of one SQS batch send: frames, FLY values, lost frames, ``completed`` (P-ROUTE-9, P-ROUTE-10,
P-ACK-2, P-ACK-3, P-RES-10, P-STAT-16).

One :class:`Outbox` per batch; each record whose handler runs gets a :class:`Ticket`, its share of the outbox.

Frames (:meth:`Outbox.stage`) are encoded as the hop produces them (``Transport.prepare``: queue URL, body with the
payload offloaded, the record's trace header) and wait in the outbox, one buffer for the whole batch, in the order
they were staged. Waiting frames leave through ``Transport.send_prepared`` (``SendMessageBatch`` per destination
queue, at most 10 entries and 1 MiB per call):

- as soon as :data:`FRAME_BATCH` wait for one queue (those);
- once the oldest waiting one was staged :data:`FRAME_MAX_WAIT` ago (all of them), served by the runtime's
  :class:`Ticker` while a handler is busy: a long-running generator streams, and frames of ended records do not wait
  for a later record;
- when their hop releases its frame 0 (its own), and at :meth:`Outbox.finish`, the end of the batch (all).

So a batch of one-frame records to one next actor costs one ``SendMessageBatch``.

Frame 0 leaves last (P-ROUTE-9): the frame that keeps the input id (the task's own lineage, whose next hop raises the
task's fence) is held by its ticket until :meth:`Outbox.release_first`, called once the hop's call ended and any
x-sump notice left (P-RES-10). The release first sends every other frame of the ticket still waiting; only if they
all left is frame 0 queued, to wait like any frame. So a child whose send failed is never stranded behind a task that
moved on: the record fails, frame 0 was never sent, and the redelivery runs the hop again (child ids are
deterministic, P-FAN-2, so children that did leave are absorbed by their own fences).

A group of frames that cannot be encoded (``SerializationError``, P-LARGE-3) refuses the hop: nothing of the group
is queued and later frames are dropped. When no frame of the hop has left yet, the frames waiting are dropped too, so
the hop fails as if it had produced none; otherwise what was staged leaves and the hop is a partial failure
(P-RES-10). :meth:`Outbox.close` raises the refusal; ``Ticket.staged`` counts what leaves.

FLY values (:meth:`Outbox.fly`) wait per ticket and leave in one ``Reporter.fly`` call at most every
:data:`FLY_INTERVAL`, and at :meth:`Outbox.close` (so they precede any later status write of the hop). The hop's first
value opens the first window rather than leaving at once, so a call that ends within it costs one write; live output
still leaves within 100 ms, below the gateway's 250 ms poll (GW-SSE-9). ``Reporter.fly`` is best effort (P-STAT-7);
anything it raises fails the record like a send error.

Failures stay with their record: an entry still failing after the transport's retries fails only its ticket (its
other frames stay sent); :meth:`Outbox.close` raises it on the record's thread, and :meth:`Outbox.finish` names the
tickets that failed after their record ended, for ``batchItemFailures``. A frame whose destination has no queue goes
to x-sump (``InfraErrors.unknown_destinations``, P-ROUTE-8); if that send fails, the ticket fails. A failed ticket
drops its later frames and never sends its frame 0. :meth:`Outbox.complete` writes the hop's ``completed`` event
(P-PROC-2 step 14) once every frame of its released ticket left.

A record's state is in its ticket, changed under the outbox's lock (the ticker thread flushes concurrently, and
records may run concurrently). Work done for a record by the ticker thread or after it ended (lost frames, FLY
values, ``completed``) runs in the copy of its ``contextvars`` context its ticket took: its trace header (P-TRACE-3)
and log keys (``asya.logkeys``).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Container, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from asya.exceptions import SerializationError
from asya.transport import Prepared, SendResult, Transport, TransportError, UnknownActorError

if TYPE_CHECKING:
    from asya.envelope import Envelope
    from asya.infra import InfraErrors
    from asya.reporting import HopRef, ProgressMode, Reporter
    from asya.routing import Outgoing, Trace

__all__ = ["FLY_INTERVAL", "FRAME_BATCH", "FRAME_MAX_WAIT", "Flushable", "Outbox", "Ticker", "Ticket"]

FRAME_BATCH: Final = 10
FRAME_MAX_WAIT: Final = 1.0
FLY_INTERVAL: Final = 0.1
_NEVER: Final = float("-inf")


class Flushable(Protocol):
    """What a :class:`Ticker` serves: an :class:`Outbox`."""

    def flush_due(self) -> None: ...


class Ticker:
    """Calls ``target.flush_due()`` when a target's scheduled time passes; one daemon thread per runtime, started on
    first use. Each target keeps its own earliest time."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._due: dict[Flushable, float] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, target: Flushable, due: float) -> None:
        with self._cond:
            current = self._due.get(target)
            if current is not None and current <= due:
                return
            self._due[target] = due
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="asya-outbox-ticker", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, target: Flushable) -> None:
        with self._cond:
            self._due.pop(target, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._due:
                        self._cond.wait()
                        continue
                    # no reference to a target while waiting: a finished batch's outbox (and its envelopes) must
                    # not outlive the invocation because it is still the earliest entry (peak memory, `make bench`)
                    wait = min(self._due.values()) - self._monotonic()
                    if wait <= 0:
                        target = min(self._due, key=self._due.__getitem__)
                        del self._due[target]
                        break
                    self._cond.wait(wait)
            target.flush_due()
            del target


# Ticket is a plain class, not a dataclass: generating a dataclass's methods costs cold-start time, and a ticket is
# never compared (it is found by identity) or printed.


class Ticket:
    """One record's share of the outbox: its hop's frames and FLY values, and how they fared."""

    __slots__ = (
        "context",
        "done",
        "entry",
        "error",
        "first",
        "fly",
        "fly_id",
        "fly_last",
        "record_id",
        "refused",
        "released",
        "report",
        "sent",
        "staged",
        "trace",
        "waiting",
    )

    def __init__(
        self, *, record_id: str, entry: Envelope, report: HopRef | None, trace: Trace, fly_id: str | None
    ) -> None:
        self.record_id = record_id
        self.entry = entry  # frame 0 keeps its id (P-FAN-2); a lost frame's x-sump envelope carries it
        self.report = report  # the task whose status the hop writes: tracked roots only
        self.trace = trace
        self.fly_id = fly_id  # the task FLY values go to (P-STAT-15); None: they are dropped
        self.context = contextvars.copy_context()  # the record's trace header and log keys, for work done later
        self.waiting: list[Prepared] = []
        self.first: list[Prepared] = []  # frame 0, held until released (P-ROUTE-9)
        self.released = False
        self.staged = 0  # frames queued to leave: ``frames_sent`` of a partial failure (P-RES-10)
        self.sent = 0  # frames handed to SQS, whatever the outcome
        self.error: BaseException | None = None  # a send failed: the record fails
        self.refused: SerializationError | None = None  # a frame could not be encoded: the hop's failure
        self.fly: list[Any] = []
        self.fly_last = _NEVER  # when FLY values last left (the first value opens a window)
        self.done: tuple[ProgressMode, int, int] | None = None  # the ``completed`` event, once every frame left


class Outbox:
    """What the hops of one SQS batch send. Thread-safe: the ticker thread flushes concurrently with the records."""

    def __init__(
        self,
        *,
        transport: Transport,
        errors: InfraErrors,
        reporter: Reporter,
        ticker: Ticker | None,
        now: Callable[[], str],
        monotonic: Callable[[], float] = time.monotonic,
        logger: logging.Logger | Any = None,
    ) -> None:
        self._transport = transport
        self._errors = errors
        self._reporter = reporter
        self._ticker = ticker
        self._now = now
        self._monotonic = monotonic
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._lock = threading.RLock()
        self._tickets: list[Ticket] = []
        self._waiting = 0  # frames waiting, over every ticket
        self._since = 0.0  # when the oldest of them was staged (or earlier: a bound, never later)

    def ticket(
        self, record_id: str, *, entry: Envelope, report: HopRef | None, trace: Trace, fly_id: str | None
    ) -> Ticket:
        """The share of the record ``record_id``, whose hop's entry envelope is ``entry``; call it in the record's
        own context (its trace header and log keys are copied from it)."""
        ticket = Ticket(record_id=record_id, entry=entry, report=report, trace=trace, fly_id=fly_id)
        with self._lock:
            self._tickets.append(ticket)
        return ticket

    def stage(self, ticket: Ticket, envelopes: Sequence[Outgoing], *, frames: int) -> None:
        """Encode and queue the ``envelopes`` of the next ``frames`` frames of ``ticket``'s hop (a compiled flow may
        continue one frame as several envelopes), frame 0 held; nothing of them when one cannot be encoded. Never
        raises: a failure is kept for :meth:`close` (see the module docstring)."""
        with self._lock:
            if ticket.error is not None or ticket.refused is not None:
                return
            try:
                items = [self._transport.prepare(o.actor, o.envelope) for o in envelopes]
            except SerializationError as exc:
                self._refuse(ticket, exc)
                return
            except Exception as exc:  # a payload offload or queue lookup that failed: the record fails (P-ACK-2)
                ticket.error = exc
                return
            ticket.staged += frames
            first_id = None if ticket.released else ticket.entry.id
            queued: list[Prepared] = []
            for item in items:
                (ticket.first if item.envelope.id == first_id else queued).append(item)
            self._queue(ticket, queued)

    def fly(self, ticket: Ticket, value: Any) -> None:
        """A FLY value of ``ticket``'s hop (P-STAT-16); dropped when the hop has no task to report to."""
        if ticket.fly_id is None:
            return
        with self._lock:
            now = self._monotonic()
            if ticket.fly_last == _NEVER:  # the first value opens a window: a short call flushes once, on close
                ticket.fly_last = now
            ticket.fly.append(value)
            if now >= ticket.fly_last + FLY_INTERVAL:
                self._flush_fly(ticket)
            else:
                self._schedule()

    def close(self, ticket: Ticket) -> int:
        """The hop's call returned (or its fan-in slices were staged): its FLY values leave. The number of frames
        staged; raises the ticket's failure, else its refusal."""
        with self._lock:
            if ticket.fly:
                self._flush_fly(ticket)
            if ticket.error is not None:
                raise ticket.error
            if ticket.refused is not None:
                raise ticket.refused
            return ticket.staged

    def release_first(self, ticket: Ticket) -> None:
        """Let frame 0 of ``ticket`` leave (P-ROUTE-9): first every other frame of the ticket still waiting is sent,
        then, if none failed, frame 0 is queued and waits like any frame. Raises the ticket's failure."""
        with self._lock:
            if ticket.error is None:
                self._flush([ticket])
            if ticket.error is not None:
                ticket.first.clear()
                raise ticket.error
            ticket.released = True
            first, ticket.first = ticket.first, []
            self._queue(ticket, first)
            if ticket.error is not None:
                raise ticket.error

    def complete(self, ticket: Ticket, mode: ProgressMode, duration_ms: int, frames: int) -> None:
        """The hop's ``completed`` event (P-PROC-2 step 14), written once every frame of the released ``ticket``
        left (now, if none waits); never for a failed ticket or one never released (a hop without frames)."""
        report = ticket.report
        with self._lock:
            if report is None or ticket.error is not None or not ticket.released:
                return
            if ticket.waiting:
                ticket.done = (mode, duration_ms, frames)
                return
        self._reporter.completed(report, mode, duration_ms, frames)

    def flush_due(self) -> None:
        """Send what is due now: FLY values whose window passed, every waiting frame once the oldest waited
        :data:`FRAME_MAX_WAIT`. Called by the ticker."""
        with self._lock:
            now = self._monotonic()
            for ticket in self._tickets:
                if ticket.fly and now >= ticket.fly_last + FLY_INTERVAL:
                    self._flush_fly(ticket)
            if self._waiting and now >= self._since + FRAME_MAX_WAIT:
                self._flush(self._tickets)
            self._schedule()

    def finish(self) -> list[tuple[str, BaseException]]:
        """Send everything still waiting; the record ids of the tickets that failed, with why, in batch order. A
        frame 0 never released (its record failed first) is never sent."""
        if self._ticker is not None:
            self._ticker.cancel(self)
        with self._lock:
            for ticket in self._tickets:
                if ticket.fly:
                    self._flush_fly(ticket)
            self._flush(self._tickets)
            return [(t.record_id, t.error) for t in self._tickets if t.error is not None]

    def _queue(self, ticket: Ticket, items: list[Prepared]) -> None:
        if items:
            if not self._waiting:
                self._since = self._monotonic()
            ticket.waiting += items
            self._waiting += len(items)
            self._flush_full()
        self._schedule()

    def _refuse(self, ticket: Ticket, error: SerializationError) -> None:
        ticket.refused = error
        if ticket.sent == 0:  # nothing of the hop left: it fails as one that produced no frame (P-RES-10)
            self._waiting -= len(ticket.waiting)
            ticket.waiting, ticket.first, ticket.staged = [], [], 0

    def _flush_full(self) -> None:
        counts: dict[str, int] = {}
        for ticket in self._tickets:
            for item in ticket.waiting:
                counts[item.url] = counts.get(item.url, 0) + 1
        full = {url for url, count in counts.items() if count >= FRAME_BATCH}
        if full:
            self._flush(self._tickets, full)

    def _schedule(self) -> None:
        if self._ticker is None:
            return
        dues = [t.fly_last + FLY_INTERVAL for t in self._tickets if t.fly]
        if self._waiting:
            dues.append(self._since + FRAME_MAX_WAIT)
        if dues:
            self._ticker.schedule(self, min(dues))

    def _flush(self, tickets: Iterable[Ticket], urls: Container[str] | None = None) -> None:
        """Send the waiting frames of ``tickets`` (only those to ``urls``, when given) and settle each outcome."""
        items: list[Prepared] = []
        owners: list[Ticket] = []
        for ticket in tickets:
            if urls is None:
                chosen, ticket.waiting = ticket.waiting, []
            else:
                chosen = [item for item in ticket.waiting if item.url in urls]
                ticket.waiting = [item for item in ticket.waiting if item.url not in urls]
            items += chosen
            owners += [ticket] * len(chosen)
        if not items:
            return
        self._waiting -= len(items)
        try:
            results = self._transport.send_prepared(items)
        except Exception as exc:  # unexpected: every frame of the group counts as failed, their records fail
            failure = TransportError(f"SendMessageBatch failed: {exc}")
            results = [SendResult(actor=item.actor, failure=failure) for item in items]
        lost: dict[Ticket, list[tuple[Prepared, UnknownActorError]]] = {}
        for ticket, item, result in zip(owners, items, results, strict=True):
            ticket.sent += 1
            if result.failure is not None:
                ticket.error = ticket.error or result.failure
            elif result.error is not None:
                lost.setdefault(ticket, []).append((item, result.error))
        for ticket, frames in lost.items():
            try:
                ticket.context.run(
                    self._errors.unknown_destinations,
                    frames,
                    entry=ticket.entry,
                    report=ticket.report,
                    now=self._now(),
                    trace=ticket.trace,
                )
            except Exception as exc:  # the x-sump send is required (P-ERR-5): the record fails
                ticket.error = ticket.error or exc
        for ticket in dict.fromkeys(owners):
            if ticket.done is not None and not ticket.waiting and ticket.error is None:
                self._completed(ticket, ticket.done)

    def _flush_fly(self, ticket: Ticket) -> None:
        values, ticket.fly = ticket.fly, []
        ticket.fly_last = self._monotonic()
        assert ticket.fly_id is not None  # fly() drops values without a task
        try:
            ticket.context.run(self._reporter.fly, ticket.fly_id, ticket.entry.id, values)
        except Exception as exc:  # Reporter.fly swallows its own failures; anything else fails the record
            ticket.error = ticket.error or exc

    def _completed(self, ticket: Ticket, done: tuple[ProgressMode, int, int]) -> None:
        ticket.done = None
        assert ticket.report is not None  # complete() defers only a tracked hop's event
        try:
            ticket.context.run(self._reporter.completed, ticket.report, *done)
        except Exception as exc:  # a best-effort write (P-STAT-7)
            self._log.warning("deferred status write failed", extra={"error": str(exc)})
