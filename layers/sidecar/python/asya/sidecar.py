"""The actor Lambda entry point: one SQS batch in, partial batch failures out (docs/protocol.md sections 3-6, 12).

``lambda_handler(event, context)`` builds an :class:`ActorRuntime` from ``os.environ`` on its first call (variables:
``asya.config``) and answers ``{"batchItemFailures": [...]}`` through ``asya.batch.RecordBatch``, the Powertools
``BatchProcessor`` subclass the crew uses too (P-ACK-1); this module's ``_Batch`` is the actor's steps of it. The
steps before the handler call that the crew shares (route and hop ceiling, pre-flight verdict, SLA) are
``asya.prehop``'s; a record's log keys end with it (``asya.logkeys``). docs/internals.md, "The life of a record",
walks the code in order.

Per batch: every body is parsed first; unless the actor runs records concurrently, the child slices of a flow fan-out
beyond the first of each fan-out are re-sent to the own queue and acked, so that other invocations run them at the same
time (P-MAP-3, ``asya.spread``); the pre-flight reads of all other fenced records (their task items, and for
children their child fence items) are made with one strongly consistent ``BatchGetItem`` (P-STAT-10, GW-DATA-8). Then
records run one at a time in batch order (P-PROC-1) through the steps of P-PROC-2; an actor with ``record_concurrency``
N over 1 (``ASYA_RECORD_CONCURRENCY``; its handler must be async, else every record is a ``HandlerLoadError``) runs them
as tasks of the handler's own event loop, N at a time, started in batch order: each record's steps before and after its
call run without a pause, so records overlap only while a handler awaits. Right before the handler call, a fenced
envelope's hop is claimed with ONE conditional write (P-ACK-8, ``asya.reporting.Reporter.claim``): for a tracked root
that write is the hop's running status too; the lease runs to the invocation's hard deadline (Lambda's remaining time at
its start) + 10 s. Frames go through the batch's ``asya.outbox.Outbox``, one buffer for every record: a frame waits at
most 1 s, or until 10 wait for one queue, or the end of the batch; frame 0 leaves last, after every other frame of its
call (P-ROUTE-9), so a batch of one-frame records costs one ``SendMessageBatch`` per destination. Other sends (x-sink,
x-sump, retries) stay per record:

1. parse (P-ENV-9..15): ``ParseError`` to x-sump;
2. start rule (P-TIME-6): the first record always starts; a record whose budget no longer fits the Lambda's remaining
   time (minus a 5 s safety margin) fails unstarted, with every later one, and is made visible again at once;
3. chained delay (P-RES-9): ``x-asya-delay-until`` more than 1 s away: re-sent to the own queue, acked;
4. tracking: stealth (P-STAT-12), hook copies (P-STAT-13), children report under their ``parent_id`` (P-FAN-3);
5. route check (P-ROUTE-1): ``RouteMismatch`` to x-sump; then the hop ceiling (P-HOP-1, ``asya.hops``):
   ``HopCeiling`` to x-sump;
6. pre-flight (P-STAT-10): canceled/paused tasks go to x-sink; a root envelope of a succeeded or failed task, or an
   envelope whose stored fence is higher than its own, is a duplicate: acked without a handler call;
7. SLA check (P-TIME-3): less than 1 s to ``deadline_at``: x-sink with reason ``Timeout`` (x-sink writes the final
   ``failed``);
8. entry update (P-PROC-4); 9. ``received``; 10. handler loaded? (``HandlerLoadError`` to x-sump, P-ABI-2);
11. a payload reference is read back from S3 (``asya.payloads``, P-LARGE-4): ``PayloadUnavailable`` to x-sump,
    another S3 error fails the record; a compiled flow's program named by a digest this runtime does not hold is
    read from the program store (``asya.programstore``, P-FLOWV-3): a read that fails fails the record, a program
    nowhere fails the task at once with ``FlowVersionMissing`` (P-FLOWV-2), its handler not called;
12. the last SLA guard, the same check again just before the call;
13. the hop claim (P-ACK-8): a duplicate (a higher fence, a finished task, or a second copy of a hop this invocation
    already claimed) is acked; a hop another run holds under a live lease fails the record, which comes back when
    that lease ends; canceled/paused go to x-sink; then the handler call under its time limit ``T = min(actor
    timeout, deadline_at - now, Lambda remaining time - 5 s)`` (P-TIME-5, ``asya.timeout``);
14. its outcome (``asya.handlercall``): frames leave as they come (``asya.outbox``) and FLY values go to the task's
    log; zero frames: x-sink ``Completed``; a handler error: the retry policy (``asya.retry``, P-RES-1..12);
    ``SerializationError``, unknown destinations and ``HandlerTimeout``: x-sump; an error after a frame: a partial
    failure (P-RES-10); then ``completed`` (progress ``detailed``, once the hop's frames left). A fenced generator
    handler is asked between yields whether its task was canceled (``asya.cancelwatch``: one eventually consistent
    read per 5 s per invocation at most, P-CANCEL-1..5) and gets ``TaskCanceledError`` at its next yield;
15. ack when every required send succeeded; a required send that fails raises, so the record fails (P-ACK-2/3); a
    frame whose entry still fails when the outbox sends it after its record ended fails that record alone, added to
    ``batchItemFailures`` at the end of the batch. Each failed record is logged once at WARNING (``record failed``,
    with ``message_id``, ``error_type`` and ``error``, no traceback) and comes back after ``min(queue visibility
    timeout, 5 * 2^(n-1))`` seconds (P-ACK-4). A record that fails after its claim releases its lease (best effort),
    so its redelivery is not held off.

Infrastructure errors are acked only after their x-sump send succeeded (P-ERR-5); a tracked envelope then gets a
best-effort final ``failed`` status (P-ERR-6). Every send goes through ``asya.payloads.PayloadStore.encode``: an
envelope over ``ASYA_OFFLOAD_THRESHOLD_KB`` leaves with its payload in S3 and a reference in its place (P-LARGE-2);
resent input payloads keep their reference (P-LARGE-5).

HTTP reporter (P-STAT-18): with ``ASYA_REPORTER=http`` (actors outside AWS) ``asya.httpreport.HttpReporter`` takes the
reporter's place: pre-flight reads ``GET {base}/api/v1/mesh/{id}`` over HTTP, reports are posted in the background to
the gateway's producer route, and no hop is claimed (P-ACK-8).

Run history (P-HIST-1..5, ``asya.history``): a hop whose envelope carries ``x-asya-history`` gets a line in the
invocation's one history object, written after the batch (best effort); its claim stores the chain head, and what it
sends carries ``x-asya-history-prev``. Envelopes without the header cost nothing of it.

X-Ray (P-TRACE-3): with ``ASYA_TRACING`` on, every send of a record carries the SQS ``AWSTraceHeader`` of that
record, else the invocation's ``_X_AMZN_TRACE_ID``, read per record from ``environ`` (``asya.xray``); frames that
leave after their record ended keep their record's. With tracing off nothing of this runs.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import headers as hdr
from asya import logkeys, prehop, routing
from asya.abi import Handler, check_record_concurrency, error_details, load_handler
from asya.batch import RecordBatch, UnstartedRecordError
from asya.cancelwatch import CancelWatch
from asya.claims import Claimed, HopClaims, fence_of
from asya.config import ActorConfig
from asya.envelope import Envelope, Reason, parse_envelope
from asya.exceptions import EnvelopeParseError, HandlerLoadError, HopHeldError
from asya.flows.mesh import flow_failure
from asya.handlercall import HandlerCall, Hop, RecordItem
from asya.history import HistoryError, InvocationHistory
from asya.infra import InfraErrors
from asya.outbox import Outbox, Ticker
from asya.payloads import PayloadStore, PayloadUnavailableError, reference_owners
from asya.programstore import FlowVersions, ProgramStore
from asya.reporting import HopRef, ProgressMode, Reporter
from asya.retry import Retrier
from asya.spread import spread
from asya.store import TaskStore
from asya.timeout import SAFETY_MARGIN_SECONDS, CallLimit, effective_limit
from asya.timeutil import Clock, format_ts, format_ts_ms, system_clock
from asya.transport import Prepared, Transport

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from asya.httpreport import HttpReporter
    from asya.xray import TraceHeaders

__all__ = ["SAFETY_MARGIN_SECONDS", "ActorRuntime", "UnstartedRecordError", "lambda_handler"]


class _Batch:
    """One invocation's state and the runtime's steps of its ``asya.batch.RecordBatch`` (``asya.batch.BatchSteps``).
    A plain class, not a dataclass: generating a dataclass's methods costs cold-start time and none is used here."""

    __slots__ = ("cancels", "claims", "context", "handed_back", "history", "items", "outbox", "runtime", "start")

    def __init__(self, runtime: ActorRuntime) -> None:
        self.runtime = runtime

    def begin(self, batch: RecordBatch) -> Callable[[SQSRecord], object]:
        """Every body parsed, the batch's pre-flight reads in one ``BatchGetItem`` (``asya.claims``); the record
        handler, a coroutine function when records run concurrently (P-PROC-1)."""
        rt = self.runtime
        records = batch.records
        self.context = batch.lambda_context
        self.start = batch.start
        self.items = {r["messageId"]: rt._parse(r["messageId"], r.get("body", "")) for r in records}
        self.outbox = Outbox(
            transport=rt._transport,
            errors=rt._errors,
            reporter=rt._reporter,
            ticker=rt._ticker,
            now=rt._now,
            monotonic=rt._monotonic,
            logger=rt._log,
        )
        # before any record starts (P-MAP-3); concurrent records run a fan-out's slices at once here already
        self.handed_back = rt._hand_back(records, self.items) if batch.concurrency <= 1 else frozenset()
        envelopes = [
            item.envelope
            for item in self.items.values()
            if item.envelope is not None and item.message_id not in self.handed_back
        ]
        rt._history = self.history = rt._new_history()
        self.claims = rt._claims.book(envelopes, self.context)
        # None with the HTTP reporter: actors outside AWS read no task item (P-STAT-18)
        self.cancels = (
            None if rt._http is not None else CancelWatch(read=rt._store.task_status, monotonic=rt._monotonic)
        )
        return self._arecord if batch.concurrency > 1 else self._record

    def _record(self, record: SQSRecord) -> None:
        if record.message_id in self.handed_back:
            return  # re-sent to the own queue for another invocation: acked (P-MAP-3)
        if self.runtime._trace is not None:
            self.runtime._trace.begin(record.raw_event)
        self.runtime._record(record, self)

    async def _arecord(self, record: SQSRecord) -> None:
        if self.runtime._trace is not None:
            self.runtime._trace.begin(record.raw_event)
        await self.runtime._arecord(record, self)

    def failed(self, message_id: str, error: BaseException) -> None:
        if not isinstance(error, HopHeldError):
            self.runtime._claims.release(self.claims, message_id)
        self.history.fail(message_id, error)

    def finish(self) -> list[tuple[str, BaseException | None]]:
        return list(self.outbox.finish())

    def late_failed(self, message_id: str) -> None:
        self.runtime._claims.release(self.claims, message_id)

    def end(self) -> None:
        self.runtime._history = None  # the next invocation names its own object
        self.runtime._flush_history(self.history)


class ActorRuntime:
    """One actor's runtime: the loaded handler, clients and reporters, reused across invocations."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        sqs: SQSClient | None = None,
        dynamodb: DynamoDBClient | None = None,
        s3: S3Client | None = None,
        clock: Clock = system_clock,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        new_id: Callable[[], str] = routing.new_uuid4,
        random: Callable[[], float] = random.random,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``environ``: where the invocation's trace header is read per record when tracing is on (default: the
        live ``os.environ``, which the Lambda runtime updates per invocation)."""
        self.config = config
        self._actor = config.actor
        self._clock = clock
        self._monotonic = monotonic
        self._new_id = new_id
        self._ts_second = -1
        self._ts_text = ""
        self._log = Logger(service=config.queue_name, level=config.log_level or None)
        self._log.append_keys(actor=config.actor)
        logkeys.install(self._log)
        self._payloads = PayloadStore(bucket=config.bucket or None, threshold_kb=config.offload_threshold_kb, s3=s3)
        self._flows = FlowVersions(config.flows, store=ProgramStore(bucket=config.bucket or None, s3=s3))
        self._trace: TraceHeaders | None = None
        if config.tracing:
            # deferred: most actors run with tracing off and then never need the module
            from asya.xray import trace_headers

            self._trace = trace_headers(config.tracing, environ)
        self._history: InvocationHistory | None = None  # the running batch's (run history, P-HIST-2)
        self._transport = Transport(
            namespace=config.namespace,
            sqs=sqs,
            sleep=sleep,
            encoder=self._encode,
            trace_header=self._trace.current if self._trace is not None else None,
            account_id=config.account_id,
            clock=clock,
        )
        self._store = TaskStore(table=config.table, bucket=config.bucket or None, dynamodb=dynamodb, s3=s3, clock=clock)
        self._http: HttpReporter | None = None
        if config.reporter == "http":  # deferred: actors in AWS write to the store and never load it (P-STAT-18)
            from asya.httpreport import http_reporter

            self._http = http_reporter(config, self._store, logger=self._log)
        self._reporter = self._http or Reporter(self._store, actor=config.actor, logger=self._log, sleep=sleep)
        self._errors = InfraErrors(
            actor=config.actor,
            transport=self._transport,
            reporter=self._reporter,
            logger=self._log,
            new_id=new_id,
            tracing=config.tracing,
        )
        self._retrier = Retrier(
            actor=config.actor,
            policies=config.resiliency,
            transport=self._transport,
            reporter=self._reporter,
            logger=self._log,
            clock=clock,
            random=random,
            flows=self._flows.book,
        )
        self._claims = HopClaims(
            store=self._store,
            reporter=self._reporter,
            clock=clock,
            actor_timeout=config.actor_timeout,
            preflight=self._http.preflight if self._http is not None else None,  # GET reads (P-STAT-18)
        )
        self._ticker = Ticker(monotonic=monotonic)
        self._handler_call = HandlerCall(
            actor=config.actor,
            now=self._now,
            flows=self._flows.book,
            errors=self._errors,
            retrier=self._retrier,
            fan_in=config.fan_in,
        )
        self._handler: Handler | None = None
        self._load_error: HandlerLoadError | None = None
        try:
            handler = load_handler(config.handler, code_dir=config.code_dir)
            check_record_concurrency(handler.spec, handler.kind, config.record_concurrency)  # P-PROC-1
            self._handler = handler
        except HandlerLoadError as exc:  # remembered: every record becomes HandlerLoadError (P-ABI-2)
            self._load_error = exc
            self._log.error("handler could not be loaded", extra={"handler": config.handler, "error": str(exc)})

    def _encode(self, actor: str, envelope: Envelope) -> str:
        """The transport's encoder: payload offloading, and the run history's link on what a recorded hop sends."""
        history = self._history
        if history is None:
            return self._payloads.encode(actor, envelope)
        return history.encode(actor, envelope, self._payloads.encode)

    def _new_history(self) -> InvocationHistory:
        return InvocationHistory(bucket=self.config.bucket or None, s3=lambda: self._payloads.s3, clock=self._clock)

    def _flush_history(self, history: InvocationHistory) -> None:
        """ONE object for the invocation's recorded hops (P-HIST-2); best effort: the records already succeeded."""
        try:
            history.flush()
        except HistoryError as exc:
            self._log.warning("run history not written", extra={"error": str(exc)})

    def _hand_back(self, records: Sequence[Mapping[str, Any]], items: Mapping[str, RecordItem]) -> frozenset[str]:
        """P-MAP-3 (``asya.spread``): the records re-sent to the own queue, unchanged, so that other invocations run
        them; the batch acks them without running them. Best effort: a record whose copy did not go out runs here."""
        chosen = spread(records, {message_id: item.envelope for message_id, item in items.items()})
        if not chosen:
            return frozenset()
        bodies = {str(r.get("messageId")): r for r in records}
        try:
            url = self._transport.queue_url(self._actor)
            sent = self._transport.send_prepared(
                [
                    Prepared(
                        self._actor,
                        _parsed(items[message_id]),
                        url=url,
                        body=items[message_id].body,
                        size=len(items[message_id].body.encode("utf-8")),
                        trace_header=_trace_attribute(bodies[message_id]) if self.config.tracing else None,
                    )
                    for message_id in chosen
                ]
            )
        except Exception as exc:  # the slices run here, in turn: slower, never lost
            self._log.warning("fan-out slices not handed back", extra={"error": str(exc)})
            return frozenset()
        handed = frozenset(message_id for message_id, result in zip(chosen, sent, strict=True) if result.ok)
        self._log.info("fan-out slices handed back to the queue", extra={"count": len(handed)})
        return handed

    def _now(self) -> str:
        """The envelope timestamp of now."""
        return self._ts(self._clock())

    def _ts(self, moment: datetime) -> str:
        """``format_ts(moment)``, formatted once per second: every hop stamps several envelopes with "now"."""
        second = int(moment.timestamp())
        if second != self._ts_second:
            self._ts_second, self._ts_text = second, format_ts(moment)
        return self._ts_text

    @staticmethod
    def _ts_ms(moment: datetime) -> str:
        return format_ts_ms(moment)

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def http_reporter(self) -> HttpReporter | None:
        """The HTTP reporter (P-STAT-18) when configured; its ``gateway.close()`` ends its threads and connections."""
        return self._http

    def close(self) -> None:
        """Close the async handler's event loop (tests and benchmarks; a Lambda container never calls it)."""
        if self._handler is not None:
            self._handler.close()

    def handle(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Process one SQS batch; returns the partial batch response (P-ACK-1). With ``record_concurrency`` over 1
        the records run as tasks of the async handler's own loop, that many at a time (P-PROC-1)."""
        batch = RecordBatch(
            _Batch(self),
            actor=self._actor,
            transport=self._transport,
            logger=self._log,
            metrics_namespace=self.config.namespace,
        )
        handler = self._handler
        if handler is not None and self.config.record_concurrency > 1:
            return batch.run(event, context, concurrency=self.config.record_concurrency, loop=handler.event_loop())
        return batch.run(event, context)

    # -- batch level --------------------------------------------------------------------------------------------

    @staticmethod
    def _parse(message_id: str, body: str) -> RecordItem:
        try:
            return RecordItem(body=body, message_id=message_id, envelope=parse_envelope(body))
        except EnvelopeParseError as exc:
            return RecordItem(body=body, message_id=message_id, error=exc)
        except Exception as exc:  # before any record runs: raising here would fail the whole batch (P-ACK-3)
            error = EnvelopeParseError(f"body could not be parsed: {type(exc).__name__}: {exc}")
            return RecordItem(body=body, message_id=message_id, error=error)

    # -- one record ---------------------------------------------------------------------------------------------

    def _record(self, record: SQSRecord, batch: _Batch) -> None:
        ready = self._ready(record, batch)
        if ready is not None:
            assert self._handler is not None  # _ready returns a call only with a loaded handler
            self._called(ready, self._handler_call.run(self._handler, ready.hop, batch.outbox), batch)

    async def _arecord(self, record: SQSRecord, batch: _Batch) -> None:
        """:meth:`_record` as a task of the handler's loop: every step before and after the call runs without a
        pause, so the batch's other records interleave only while this handler awaits (P-PROC-1)."""
        ready = self._ready(record, batch)
        if ready is not None:
            assert self._handler is not None
            self._called(ready, await self._handler_call.arun(self._handler, ready.hop, batch.outbox), batch)

    def _ready(self, record: SQSRecord, batch: _Batch) -> _Ready | None:
        """Steps 1-13 of P-PROC-2: the hop to call the handler with, or ``None`` when a step decided the record."""
        item = batch.items[record.message_id]
        now = self._clock()
        env = item.envelope
        if env is None:
            assert item.error is not None  # _parse sets one of the two
            batch.start.start_unchecked()
            self._errors.parse_failure(item.body, item.error, self._ts(now))
            return None
        budget = self.config.actor_timeout
        deadline = prehop.deadline_of(env)
        if deadline is not None:
            budget = min(budget, (deadline - now).total_seconds())
        batch.start.admit(message_id=record.message_id, receipt_handle=record.receipt_handle, budget_seconds=budget)
        status = env.status
        logkeys.update(
            correlation_id=env.id,
            attempt=status.attempt if status else 1,
            phase=status.phase if status else "pending",
        )
        return self._before_call(item, env, batch, now, deadline)

    def _before_call(
        self, item: RecordItem, env: Envelope, batch: _Batch, now_dt: datetime, deadline: datetime | None
    ) -> _Ready | None:
        """Steps 3-13 of P-PROC-2; ``deadline`` is ``env``'s parsed ``status.deadline_at``."""
        if self._retrier.defer(env, now_dt):  # step 3: chained retry delay (P-RES-9)
            return None
        actor = self._actor
        now = self._ts(now_dt)
        hook = hdr.is_hook_copy(env.headers)
        untracked = hook or hdr.is_stealth(env.headers)
        report = None if untracked or env.parent_id else _hop_ref(env)
        trace = routing.Trace.for_hop(env.headers, enabled=self.config.tracing)

        def to_sump(reason: Reason, message: str, out: Envelope, details: Mapping[str, Any] | None = None) -> None:
            """This record's infrastructure error (P-ERR-4..6): x-sump with the payload as it came, then its status."""
            self._errors.report(
                reason,
                message,
                out,
                report,
                now,
                original_payload=env.payload,
                details=details,
                trace=trace,
                writer_id=item.message_id,
            )

        refusal = prehop.refusal(env, actor, self.config.max_hops)  # step 5
        if refusal is not None:
            assert refusal.reason is not None  # a refusal goes to x-sump
            to_sump(refusal.reason, refusal.message, env)
            return None
        fence = None if untracked else fence_of(env, actor)
        if fence is not None and self._decided(env, self._claims.screen(env, fence, batch.claims), now, trace):
            return None  # step 6 (P-STAT-10)
        if not hook and self._sla_expired(env, deadline, now_dt, trace):  # step 7
            return None

        entry = routing.entry_update(env, actor, now)
        mode = ProgressMode.of(env.headers)
        size_kb = round(len(item.body.encode("utf-8")) / 1024, 1) if report and mode is not ProgressMode.FINAL else 0
        if report is not None:
            self._reporter.received(report, mode, size_kb)
        if self._handler is None:
            assert self._load_error is not None
            to_sump(Reason.HANDLER_LOAD_ERROR, str(self._load_error), entry, error_details(self._load_error))
            return None
        try:  # step 11: the handler gets the payload itself; resends keep the reference (P-LARGE-4, P-LARGE-5)
            entry.payload = self._payloads.rehydrate(env.payload, owners=reference_owners(env))
        except PayloadUnavailableError as exc:
            to_sump(Reason.PAYLOAD_UNAVAILABLE, str(exc), entry)
            return None
        self._flows.load(env.headers)  # step 11: the program of the task's digest (P-FLOWV-3)
        missing = self._flows.missing(env.headers)
        if missing is not None:  # P-FLOWV-2: no other program may run for this task
            self._errors.send(flow_failure(entry, missing, now=now))
            self._log.error("flow program missing: task failed", extra={"error": str(missing)})
            return None
        if not hook and self._sla_expired(env, deadline, self._clock(), trace):  # step 12: the last guard
            return None
        if fence is not None:  # step 13: the hop claim (P-ACK-8), with the history's chain head (P-HIST-4)
            claimed = self._claims.claim(
                item.message_id,
                fence,
                batch.claims,
                report=report,
                mode=mode,
                size_kb=size_kb,
                history=batch.history.mark(env),
            )
            if self._decided(env, claimed, self._ts(self._clock()), trace):
                return None
            if claimed is Claimed.UNTRACKED:
                fence = None  # no task record (P-STAT-14): the call goes on unclaimed
        fly_id = None if untracked else (env.parent_id or env.id)
        limit = self._call_limit(None if hook else deadline, batch.context)  # hooks run past it (P-TIME-4)
        ticket = batch.outbox.ticket(item.message_id, entry=entry, report=report, trace=trace, fly_id=fly_id)
        hop = Hop(
            item=item,
            entry=entry,
            trace=trace,
            report=report,
            limit=limit,
            fence=fence,
            ticket=ticket,
            # fenced hops only: an untracked envelope has no task item to read (P-CANCEL-1..5)
            cancel=batch.cancels.check_for(fly_id) if fence is not None and batch.cancels and fly_id else None,
        )
        recorded = batch.history.open(
            env, actor=actor, message_id=item.message_id, payload=entry.payload, started_at=self._ts_ms(self._clock())
        )
        return _Ready(hop, mode=mode, recorded=recorded, started=self._monotonic())

    def _called(self, ready: _Ready, frames: int | None, batch: _Batch) -> None:
        """Steps 14-15 after the call: the hop's history line, then ``completed`` once its frames left."""
        hop = ready.hop
        if ready.recorded:
            batch.history.close(hop.item.message_id, round((self._monotonic() - ready.started) * 1000, 1))
        if frames is not None:
            batch.outbox.complete(hop.ticket, ready.mode, int((self._monotonic() - ready.started) * 1000), frames)

    def _decided(self, env: Envelope, verdict: Claimed | None, now: str, trace: routing.Trace) -> bool:
        """Act on a pre-flight or claim verdict that decides the record: canceled/paused to x-sink, a duplicate acked
        (P-STAT-10, P-ACK-8). False when the record goes on."""
        if verdict is None or verdict is Claimed.CLAIMED or verdict is Claimed.UNTRACKED:
            return False
        decided = prehop.preflight(env, verdict.value, actor=self._actor, now=now, trace=trace)
        return decided is not None and self._act(decided)

    def _sla_expired(self, env: Envelope, deadline: datetime | None, now: datetime, trace: routing.Trace) -> bool:
        """The SLA check (P-TIME-3, ``asya.prehop.sla``); True when the envelope went to x-sink."""
        decided = prehop.sla(env, deadline, now, actor=self._actor, trace=trace)
        return decided is not None and self._act(decided)

    def _act(self, verdict: prehop.Verdict) -> bool:
        """Send a pre-hop verdict's x-sink envelope (required, P-ACK-2) and log it; the record is decided."""
        if verdict.out is not None:
            self._errors.send(verdict.out)
        getattr(self._log, verdict.level)(verdict.log, extra=verdict.extra)
        return True

    def _call_limit(self, deadline: datetime | None, context: Any) -> CallLimit:
        """``T`` of P-TIME-5, from the actor timeout, the task deadline and the Lambda's remaining time."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        return effective_limit(
            actor_timeout=self.config.actor_timeout,
            deadline_left=(deadline - self._clock()).total_seconds() if deadline is not None else None,
            lambda_left=remaining() / 1000 if remaining is not None else None,
        )


class _Ready:
    """A record about to call its handler (step 13 of P-PROC-2 done): its hop, and what the end of the call needs."""

    __slots__ = ("hop", "mode", "recorded", "started")

    def __init__(self, hop: Hop, *, mode: ProgressMode, recorded: bool, started: float) -> None:
        self.hop = hop
        self.mode = mode
        self.recorded = recorded  # the hop has a line in the run history (P-HIST-2)
        self.started = started  # monotonic time of the call's start


def _parsed(item: RecordItem) -> Envelope:
    """The envelope of a record :func:`asya.spread.spread` chose (it chooses parsed ones only)."""
    assert item.envelope is not None
    return item.envelope


def _trace_attribute(record: Mapping[str, Any]) -> str | None:
    attributes = record.get("attributes")
    value = attributes.get("AWSTraceHeader") if isinstance(attributes, Mapping) else None
    return value if isinstance(value, str) and value else None


def _hop_ref(env: Envelope) -> HopRef:
    return HopRef(
        task_id=env.id,
        route=env.route,
        envelope_id=env.id,
        created_at=env.status.created_at if env.status is not None else None,
    )


_RUNTIME: ActorRuntime | None = None


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point of every user actor; the runtime is built on the first call."""
    global _RUNTIME  # noqa: PLW0603 - one runtime per Lambda container (P-ABI-2)
    if _RUNTIME is None:
        _RUNTIME = ActorRuntime(ActorConfig.from_env(os.environ))
    return _RUNTIME.handle(event, context)
