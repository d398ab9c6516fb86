"""The batch loop every crew actor shares (P-PROC-3: steps 1, 2 and 15 of P-PROC-2, P-ACK-1..3, P-CKPT-1).

A batch runs in two passes, because a checkpoint object holds the lines of every record of the invocation with the
same phase and date and must be written before any final status write of its records (P-CKPT-1):

1. **prepare**, each record in batch order: the start rule (P-TIME-6, budget ``B = 0`` for crew: the first record
   always starts; a later one starts only while the Lambda has at least the 5 s safety margin left, otherwise it and
   every later record fail unstarted and are made visible again at once, best effort); parse the body; when the
   subclass says the envelope needs a checkpoint (:meth:`CrewRuntime._checkpoint_phase`), rehydrate its payload;
2. **checkpoint**: one PUT per (phase, date) object (``asya_crew.checkpoint``);
3. **complete**, each record in batch order through ``asya.batch.RecordBatch``, the Powertools ``BatchProcessor``
   subclass the actor layer uses too: a record whose prepare step or checkpoint object failed fails here; otherwise
   the subclass's :meth:`CrewRuntime._complete` runs with the record's :class:`~asya_crew.checkpoint.CheckpointLine`
   (a record whose checkpoint S3 throttled first gets :meth:`CrewRuntime._checkpoint_overloaded`, P-SINK-8). A body
   that is not an envelope goes to :meth:`CrewRuntime._unparsed` instead (x-sump, P-ERR-4).
   A record that fails is reported in ``batchItemFailures`` (with one WARNING line naming the error) and never
   affects the others; it comes back after P-ACK-4's backoff (``asya.batch.failed_visibilities``), not after the
   queue's long visibility timeout.

Every crew runtime takes the same keyword options (:class:`CrewOptions`): injected clients (each created lazily when
absent), clock, logger, environment (for the trace header), and the id factories of the envelopes it creates
(``new_id``) and of its checkpoint objects (``new_key_id``). A subclass that needs more takes its own keywords and
passes ``**options`` on; every runtime has the task store (``self._store``, ``asya.store.TaskStore``).

Payload references (P-LARGE-4): :meth:`CrewRuntime._hydrated` reads them back for checkpoints and results; crew sends
go through the same offloading encoder as the layer's (``asya.payloads``), and, with ``ASYA_TRACING`` on, carry the
record's ``AWSTraceHeader`` like the layer's (P-TRACE-3, ``asya.xray``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import headers as hdr
from asya import logkeys, routing
from asya.batch import RecordBatch, UnstartedRecordError
from asya.config import ActorConfig
from asya.envelope import Envelope, Phase, Status, parse_envelope
from asya.exceptions import EnvelopeParseError
from asya.infra import parse_failure_envelope
from asya.overload import overload_of
from asya.payloads import PayloadStore, PayloadUnavailableError, is_reference, reference_owners
from asya.programstore import FlowVersions, ProgramStore
from asya.store import ChildFinish, ChildOutcome, TaskStore
from asya.timeout import SAFETY_MARGIN_SECONDS
from asya.timeutil import Clock, format_ts, system_clock
from asya.transport import Transport
from asya.xray import trace_headers
from asya_crew.checkpoint import CheckpointEntry, CheckpointError, CheckpointLine, CheckpointWriter

__all__ = [
    "SAFETY_MARGIN_SECONDS",
    "CrewOptions",
    "CrewRuntime",
    "Parsed",
    "Unparsed",
    "UnstartedRecordError",
    "failure_message",
]


class CrewOptions(TypedDict, total=False):
    """The keyword options of :class:`CrewRuntime`, for subclasses that add their own (``**options: Unpack[...]``)."""

    sqs: Any
    dynamodb: Any
    s3: Any
    clock: Clock
    logger: Any
    environ: Mapping[str, str] | None
    new_id: Callable[[], str]
    new_key_id: Callable[[], str] | None


@dataclass(frozen=True, slots=True)
class Unparsed:
    """A record whose body is not a valid envelope."""

    body: str
    error: EnvelopeParseError


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed record: its envelope and phase and, when it is checkpointed, the phase of its checkpoint and the
    envelope with its payload rehydrated (P-LARGE-4)."""

    envelope: Envelope
    phase: str
    checkpoint_phase: str | None = None
    hydrated: Envelope | None = None


class CrewRuntime:
    """What every crew actor shares: config, clock, lazy S3 client, transport, task store, logger, checkpoints and the
    batch loop. Subclasses implement ``_checkpoint_phase`` and ``_complete``; clients are created lazily when not
    injected."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        sqs: Any = None,
        dynamodb: Any = None,
        s3: Any = None,
        clock: Clock = system_clock,
        logger: Any = None,
        environ: Mapping[str, str] | None = None,
        new_id: Callable[[], str] = routing.new_uuid4,
        new_key_id: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._s3 = s3
        self._new_id = new_id
        self._store = TaskStore(table=config.table, bucket=config.bucket or None, dynamodb=dynamodb, s3=s3, clock=clock)
        self._payloads = PayloadStore(bucket=config.bucket or None, threshold_kb=config.offload_threshold_kb, s3=s3)
        #: the compiled flows the aggregator and x-resume run continuations of, with the versions they read (P-FLOWV-3)
        self._flows = FlowVersions(config.flows, store=ProgramStore(bucket=config.bucket or None, s3=s3))
        self._trace = trace_headers(config.tracing, environ)
        trace_header = self._trace.current if self._trace is not None else None
        self._transport = Transport(
            namespace=config.namespace,
            sqs=sqs,
            encoder=self._payloads.encode,
            trace_header=trace_header,
            account_id=config.account_id,
            clock=clock,
        )
        self._log = logger if logger is not None else Logger(service=config.queue_name, level=config.log_level or None)
        naming = {} if new_key_id is None else {"new_id": new_key_id}
        self._checkpoints = CheckpointWriter(bucket=config.bucket, s3=lambda: self.s3, clock=clock, **naming)
        if isinstance(self._log, Logger):  # a plain ``logging.Logger`` (tests) has no runtime-wide keys
            self._log.append_keys(actor=config.actor)
        logkeys.install(self._log)

    def _envelope_keys(self, envelope: Envelope) -> None:
        """The log keys of one record (P-TRACE-4, ``asya.logkeys``): correlation id = envelope id, attempt and
        phase; they end with the record."""
        status = envelope.status
        logkeys.update(
            correlation_id=envelope.id,
            attempt=status.attempt if status is not None else 1,
            phase=status.phase if status is not None else Phase.PENDING.value,
        )

    def _unparsed(self, record: SQSRecord, prepared: Unparsed) -> None:
        """Step 1 (P-ENV-9..12, P-ERR-4): x-sump with ``details.raw_body``; the record is acked after the send. x-sump
        itself overrides it."""
        error = prepared.error
        out = parse_failure_envelope(
            prepared.body,
            error,
            actor=self.config.actor,
            now=self._now(),
            new_id=self._new_id,
            tracing=self.config.tracing,
        )
        self._envelope_keys(out.envelope)
        self._transport.send(out.actor, out.envelope)
        self._log.error("body is not a valid envelope: sent to x-sump", extra={"error": str(error)})

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            from asya.awsclients import ACTOR_BUDGET, aws_client

            self._s3 = aws_client("s3", ACTOR_BUDGET)
        return self._s3

    def _now(self) -> str:
        return format_ts(self._clock())

    def _hydrated(self, envelope: Envelope) -> Envelope:
        """A copy of ``envelope`` whose payload, and a reference in ``payload.original_payload``, are read back from S3
        for the checkpoint and the task's result (P-LARGE-4). Sends keep the envelope itself, references included
        (P-LARGE-5). A reference that cannot be read (``PayloadUnavailable``) is kept as it is, with a warning: the
        checkpoint still says where the payload was; any other S3 error fails the record."""
        payload = envelope.payload
        try:
            owners = reference_owners(envelope)
            hydrated = self._payloads.rehydrate(payload, owners=owners)
            if isinstance(hydrated, dict) and is_reference(hydrated.get("original_payload")):
                original = self._payloads.rehydrate(hydrated["original_payload"], owners=owners)
                hydrated = {**hydrated, "original_payload": original}
        except PayloadUnavailableError as exc:
            self._log.warning("payload reference not readable: kept as it is", extra={"error": str(exc)})
            return envelope
        return envelope if hydrated is payload else replace(envelope, payload=hydrated)

    # ------------------------------------------------------------------ the batch

    def handle(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Process one SQS batch; ``{"batchItemFailures": [...]}`` (P-ACK-1)."""
        return RecordBatch(
            _CrewBatch(self),
            actor=self.config.actor,
            transport=self._transport,
            logger=self._log,
            metrics_namespace=self.config.namespace,
        ).run(event, context)

    def _prepare(self, record: SQSRecord) -> Parsed | Unparsed:
        body = record.body or ""
        try:
            envelope = parse_envelope(body)
        except EnvelopeParseError as exc:
            return Unparsed(body=body, error=exc)
        phase = envelope.status.phase if envelope.status is not None else Phase.PENDING.value
        checkpoint_phase = self._checkpoint_phase(envelope, phase)
        if checkpoint_phase is None:
            return Parsed(envelope=envelope, phase=phase)
        self._envelope_keys(envelope)
        return Parsed(
            envelope=envelope, phase=phase, checkpoint_phase=checkpoint_phase, hydrated=self._hydrated(envelope)
        )

    def _plan(self, record: SQSRecord, prepared: Parsed, *, ends_child: bool, error: str | None) -> Parsed:
        """Reserve a checkpointed record's line in record order, so a child's finish write can name it and roots and
        children of a batch still share one object per phase (P-FAN-9). When the envelope ends a fan-out child
        (``ends_child``, not stealth), its child item is marked finished first, with how it ended (``error`` when
        failed) and that line (``TaskStore.finish_child``, one write per child, P-ACK-7, P-FAN-7); when another
        record finished it before, this one is a late copy: its line is given back and ``prepared`` comes back without
        a checkpoint, so a finished child is never failed later."""
        assert prepared.checkpoint_phase is not None and prepared.hydrated is not None
        line = self._checkpoints.plan(record.message_id, prepared.checkpoint_phase, prepared.hydrated)
        envelope = prepared.envelope
        if not ends_child or not envelope.parent_id or hdr.is_stealth(envelope.headers):
            return prepared
        status = envelope.status or Status()
        outcome = ChildOutcome(
            writer_id=record.message_id,
            phase=prepared.phase,
            actor=status.actor,
            error=error,
            attempt=status.attempt,
            checkpoint=(line.key, line.line),
        )
        try:
            found = self._store.finish_child(envelope.id, envelope.parent_id, outcome)
        except Exception:
            self._checkpoints.unplan(record.message_id)  # this record fails: its line goes to the next one
            raise
        if found is not ChildFinish.ALREADY:
            return prepared
        self._checkpoints.unplan(record.message_id)
        self._log.info(
            "late copy of a finished child: acked without a checkpoint",
            extra={"correlation_id": envelope.id, "phase": prepared.phase},
        )
        return Parsed(envelope=envelope, phase=prepared.phase)

    def _report_failed(
        self,
        task_id: str,
        envelope: Envelope,
        checkpoint: CheckpointLine | None,
        writer_id: str,
        *,
        child_label: str = "",
    ) -> bool:
        """The final ``failed`` status of ``task_id`` from a failed ``envelope`` (P-SINK-5 (c)): its error (after
        ``child_label``), details and actor. Conditional: a task already terminal keeps its status and only gets the
        checkpoint when it has none (P-STAT-2); False then, or for an unknown task. A write error propagates."""
        status = envelope.status or Status()
        payload = envelope.payload if isinstance(envelope.payload, dict) else {}
        details = status.error if status.error else payload.get("details")
        return self._store.report_final(
            task_id,
            status="failed",
            error=child_label + failure_message(envelope),
            error_details=details if isinstance(details, dict) else None,
            failed_actor=status.actor,
            checkpoint_key=checkpoint.key if checkpoint is not None else None,
            checkpoint_line=checkpoint.line if checkpoint is not None else None,
            envelope_id=envelope.id,
            created_at=status.created_at,
            writer_id=writer_id,
        )

    def _fail_fan_in_origin(self, envelope: Envelope, writer_id: str) -> None:
        """A failed fan-in slice fails its task, ``x-asya-fan-in.origin_id`` (x-sink P-SINK-3, x-sump P-SUMP-8),
        unless stealth, with no checkpoint: the error names the child, and ``failed_actor`` is where it failed (the
        store shows that actor as ``current_actor`` too), never the actor that fanned out (P-FAN-8). A task
        already terminal stays as it is, so a late or repeated slice rewrites nothing."""
        fan_in = envelope.headers.get(hdr.FAN_IN)
        origin = fan_in.get("origin_id") if isinstance(fan_in, dict) else None
        if not isinstance(origin, str) or not origin or hdr.is_stealth(envelope.headers):
            return
        label = f"child {envelope.id}: " if envelope.id != origin else ""
        extra = {"correlation_id": envelope.id, "origin_id": origin}
        if self._report_failed(origin, envelope, None, writer_id, child_label=label):
            self._log.info("fan-in origin failed", extra=extra)
        else:
            self._log.debug("fan-in origin unknown or already final: not written", extra=extra)

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        """The phase of the checkpoint ``envelope`` gets in this crew actor, or ``None`` for none."""
        raise NotImplementedError

    def _complete(self, record: SQSRecord, prepared: Parsed, checkpoint: CheckpointLine | None) -> None:
        """Everything after the checkpoint, for a body that parsed (else :meth:`_unparsed`); raising fails the
        record."""
        raise NotImplementedError

    def _checkpoint_overloaded(self, record: SQSRecord, prepared: Parsed) -> None:
        """The record's checkpoint PUT was throttled or S3 was unavailable; the record fails after this and comes
        back for its checkpoint. A subclass may write what must not wait for it (x-sink: P-SINK-8)."""


def failure_message(envelope: Envelope) -> str:
    """A failed envelope's error message: ``status.error.message``, else the error payload's ``error``."""
    status = envelope.status or Status()
    error = status.error.get("message") if status.error else None
    if isinstance(error, str):
        return error
    payload = envelope.payload if isinstance(envelope.payload, dict) else {}
    return payload["error"] if isinstance(payload.get("error"), str) else "task failed"


class _CrewBatch:
    """The crew's steps of an ``asya.batch.RecordBatch`` (``asya.batch.BatchSteps``): the prepare pass and the
    checkpoint objects before the first record completes (P-CKPT-1)."""

    __slots__ = ("prepared", "runtime", "written")

    def __init__(self, runtime: CrewRuntime) -> None:
        self.runtime = runtime
        self.prepared: dict[Hashable, Parsed | Unparsed | Exception] = {}
        self.written: dict[Hashable, CheckpointLine | CheckpointError] = {}

    def begin(self, batch: RecordBatch) -> Callable[[SQSRecord], None]:
        for raw in batch.records:
            record = SQSRecord(raw)
            with logkeys.record():
                try:
                    batch.start.admit(message_id=record.message_id, receipt_handle=record.receipt_handle)
                    self.prepared[record.message_id] = self.runtime._prepare(record)
                except Exception as exc:  # re-raised for this record alone when it completes (P-ACK-3)
                    self.prepared[record.message_id] = exc
        entries = [
            CheckpointEntry(ref, outcome.checkpoint_phase, outcome.hydrated)
            for ref, outcome in self.prepared.items()
            if isinstance(outcome, Parsed) and outcome.checkpoint_phase is not None and outcome.hydrated is not None
        ]
        if entries:
            self.written = self.runtime._checkpoints.write(entries)
        return self._complete

    def _complete(self, record: SQSRecord) -> None:
        outcome = self.prepared[record.message_id]
        if isinstance(outcome, Exception):
            raise outcome
        line = self.written.get(record.message_id)
        if isinstance(line, CheckpointError):
            if isinstance(outcome, Parsed) and overload_of(line) is not None:
                self.runtime._checkpoint_overloaded(record, outcome)
            raise line
        runtime = self.runtime
        if runtime._trace is not None:
            runtime._trace.begin(record.raw_event)
        if isinstance(outcome, Unparsed):
            runtime._unparsed(record, outcome)
            return
        runtime._envelope_keys(outcome.envelope)
        runtime._complete(record, outcome, line)

    def failed(self, message_id: str, error: BaseException) -> None:
        """Crew records hold no claim the batch releases."""

    def finish(self) -> list[tuple[str, BaseException | None]]:
        return []  # crew sends are synchronous: no record fails after it ended

    def late_failed(self, message_id: str) -> None:
        """Never called: :meth:`finish` names no record."""

    def end(self) -> None:
        """Nothing is flushed after a crew batch."""
