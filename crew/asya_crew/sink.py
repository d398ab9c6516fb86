"""x-sink: the end of every route (P-SINK-1..7; checkpoints P-CKPT-1..4).

Per record, after parsing (a body that does not parse goes to x-sump as ``ParseError``, P-ERR-4):

- hook copy (``x-asya-sink-hook``): phase ``failed`` is forwarded to x-sump, anything else acked (P-SINK-2);
- fan-in partial (``x-asya-fan-in``): phase ``failed`` becomes the final ``failed`` status of
  ``x-asya-fan-in.origin_id`` (unless stealth; ``CrewRuntime._fail_fan_in_origin``, which x-sump shares, P-SUMP-8)
  and is forwarded to x-sump; other phases are logged and acked (P-SINK-3);
- phases other than ``succeeded``/``failed``: logged at INFO and acked (P-SINK-4); a ``canceled`` fan-out child (not
  stealth) is first marked finished ``canceled`` at the actor it stopped at (``TaskStore.finish_child``, P-FAN-7), so
  the task's child tree stops reading ``running``;
- ``succeeded``/``failed`` of a fan-out child (not stealth), before anything else: its child item is marked finished
  (``TaskStore.finish_child``, one write per child, P-ACK-7), with how it ended and the checkpoint line reserved
  for it in record order (``CheckpointWriter.plan``: the child tree, P-FAN-7/9); when another record finished
  it before, this one is a late copy: logged and acked with no checkpoint, status or x-sump send, so a finished child
  is never failed later;
- ``succeeded``/``failed`` (P-SINK-5): (a) the payload is rehydrated; (b) the envelope is one line of the invocation's
  JSON Lines object for its phase and date (``asya_crew.checkpoint``), written before any status write; a failed PUT
  fails every record of that object; (c) unless ``parent_id`` is set or the envelope is in stealth mode, the final
  status of ``x-asya-origin-id`` (else ``id``) with ``checkpoint_key``, ``checkpoint_line`` and ``writer_id`` = the
  record's SQS message id, and for a succeeded one the line's bytes (``result_span``): a result too large for the
  task item is read from the line, not written to a result item (GW-DATA-10), unless ``ASYA_RESULT_IN_CHECKPOINT``
  is ``false`` or the line is over 4 MiB; an unknown task is a no-op, a stale write is fine (it attaches the
  checkpoint to a terminal task that has none, P-STAT-2), a write error fails the record; (d) one copy per
  ``ASYA_SINK_HOOKS`` actor for a root envelope (P-SINK-6), each sent even when another fails; (e) phase ``failed``:
  the envelope to x-sump with header ``x-asya-checkpointed = {"key", "line"}``, so x-sump does not checkpoint it
  again (P-SUMP-4); (f) ack once every send succeeded.

Payload references (``__ref__``, P-LARGE-4) are read back before (b) and (c): the checkpoint and the task's result hold
the payload itself (and ``payload.original_payload`` of a failed envelope); hooks and x-sump get the envelope as it
came, references included (P-LARGE-5).
Environment: ``asya.config`` (``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_TABLE``, ``ASYA_BUCKET``, ``ASYA_SINK_HOOKS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import headers as hdr
from asya import naming
from asya.envelope import Envelope, Phase, Route, Status
from asya.exceptions import AsyaError
from asya.store import ChildOutcome
from asya.store.records import VIEW_INLINE_LIMIT
from asya_crew.checkpoint import CheckpointLine
from asya_crew.entry import lambda_entry
from asya_crew.runtime import CrewRuntime, Parsed, Unparsed, failure_message

__all__ = ["HookSendError", "SinkRuntime", "lambda_handler"]

_FINAL_PHASES: Final = frozenset({Phase.SUCCEEDED.value, Phase.FAILED.value})


class HookSendError(AsyaError):
    """At least one sink-hook copy could not be sent; the record fails so SQS retries it (P-SINK-5 (f))."""


class SinkRuntime(CrewRuntime):
    """The x-sink Lambda runtime; clients are created lazily when not injected."""

    def _prepare(self, record: SQSRecord) -> Parsed | Unparsed:
        prepared = super()._prepare(record)
        if not isinstance(prepared, Parsed) or prepared.checkpoint_phase is None or prepared.hydrated is None:
            return prepared
        # before the checkpoint: a second record for a finished child writes no second line (P-ACK-7)
        failed = prepared.phase == Phase.FAILED.value
        error = failure_message(prepared.envelope) if failed else None
        return self._plan(record, prepared, ends_child=True, error=error)

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        headers = envelope.headers
        if hdr.is_hook_copy(headers) or hdr.FAN_IN in headers or phase not in _FINAL_PHASES:
            return None
        return phase

    def _complete(self, record: SQSRecord, prepared: Parsed, checkpoint: CheckpointLine | None) -> None:
        envelope = prepared.envelope
        phase = prepared.phase
        context = {"correlation_id": envelope.id, "phase": phase}
        if hdr.is_hook_copy(envelope.headers):
            if phase == Phase.FAILED.value:
                self._transport.send(naming.SUMP, envelope)
            return
        if phase == Phase.CANCELED.value:
            self._finish_canceled_child(record.message_id, envelope, context)
        if hdr.FAN_IN in envelope.headers:
            self._fan_in_partial(record.message_id, envelope, phase, context)
            return
        if checkpoint is None or prepared.hydrated is None:
            self._log.info("envelope acked without a final status", extra=context)
            return
        self._finish(record.message_id, prepared, checkpoint, context)

    def _checkpoint_overloaded(self, record: SQSRecord, prepared: Parsed) -> None:
        """P-SINK-8: S3 throttled the checkpoint of a finished root task. Its success is written now, without a
        checkpoint, so the task never waits in ``running`` for a deadline while the record retries its PUT (or sits in
        the DLQ); the delivery whose PUT goes through attaches the checkpoint. Best effort: the record fails anyway."""
        envelope = prepared.envelope
        headers = envelope.headers
        if (
            prepared.phase != Phase.SUCCEEDED.value
            or envelope.parent_id
            or hdr.is_stealth(headers)
            or hdr.is_hook_copy(headers)
            or hdr.FAN_IN in headers
        ):
            return
        hydrated = prepared.hydrated or envelope
        status = hydrated.status or Status()
        try:
            self._store.report_final(
                _task_id(envelope),
                status="succeeded",
                result=hydrated.payload,
                envelope_id=envelope.id,
                created_at=status.created_at,
                writer_id=record.message_id,
            )
        except Exception as exc:  # the record fails and comes back either way
            self._log.warning("final status not written ahead of the checkpoint: %s", exc)
            return
        self._log.warning(
            "checkpoint throttled: task ended succeeded, its checkpoint follows on a redelivery",
            extra={"correlation_id": envelope.id},
        )

    def _finish(self, writer_id: str, prepared: Parsed, checkpoint: CheckpointLine, context: Mapping[str, Any]) -> None:
        envelope, phase = prepared.envelope, prepared.phase
        hydrated = prepared.hydrated or envelope
        if not envelope.parent_id and not hdr.is_stealth(envelope.headers):
            self._report(_task_id(envelope), hydrated, phase, checkpoint, writer_id)
        hook_errors = self._send_hooks(envelope, phase) if not envelope.parent_id else []
        if phase == Phase.FAILED.value:
            forwarded = envelope.copy()
            forwarded.headers[hdr.CHECKPOINTED] = checkpoint.header()
            self._transport.send(naming.SUMP, forwarded)
        if hook_errors:
            raise HookSendError(f"sink hooks not reached: {'; '.join(hook_errors)}")
        self._log.info(
            "envelope finished",
            extra={**context, "checkpoint_key": checkpoint.key, "checkpoint_line": checkpoint.line},
        )

    def _report(self, task_id: str, envelope: Envelope, phase: str, checkpoint: CheckpointLine, writer_id: str) -> None:
        status = envelope.status or Status()
        if phase == Phase.SUCCEEDED.value:
            self._store.report_final(
                task_id,
                status="succeeded",
                result=envelope.payload,
                checkpoint_key=checkpoint.key,
                checkpoint_line=checkpoint.line,
                result_span=self._result_span(checkpoint),
                envelope_id=envelope.id,
                created_at=status.created_at,
                writer_id=writer_id,
            )
            return
        self._report_failed(task_id, envelope, checkpoint, writer_id)

    def _result_span(self, checkpoint: CheckpointLine) -> tuple[int, int] | None:
        """The checkpoint line's bytes when the task's result may be read from there (GW-DATA-10): the checkpoints
        outlive the task record, and the line is no larger than a view reads inline; else ``None``, a result item."""
        span = checkpoint.span
        if not self.config.result_in_checkpoint or span is None or span[1] > VIEW_INLINE_LIMIT:
            return None
        return span

    def _finish_canceled_child(self, writer_id: str, envelope: Envelope, context: Mapping[str, Any]) -> None:
        """A fan-out child stopped by its task's cancel ends here: its item reads ``canceled`` at the actor it stopped
        at (P-FAN-7), on the finish write every child gets once (P-ACK-7), without a checkpoint (P-SINK-4)."""
        if not envelope.parent_id or hdr.is_stealth(envelope.headers):
            return
        status = envelope.status or Status()
        outcome = ChildOutcome(
            writer_id=writer_id, phase=Phase.CANCELED.value, actor=status.actor, attempt=status.attempt
        )
        found = self._store.finish_child(envelope.id, envelope.parent_id, outcome)
        self._log.info("canceled child finished", extra={**context, "child": found.value})

    def _fan_in_partial(self, writer_id: str, envelope: Envelope, phase: str, context: Mapping[str, Any]) -> None:
        if phase != Phase.FAILED.value:
            self._log.warning("fan-in partial reached x-sink: acked", extra=context)
            return
        self._fail_fan_in_origin(envelope, writer_id)
        self._transport.send(naming.SUMP, envelope)

    def _send_hooks(self, envelope: Envelope, phase: str) -> list[str]:
        """One copy per hook (P-SINK-6); every hook is tried, failures are returned."""
        errors = []
        now = self._now()
        status = envelope.status or Status()
        prev = [*envelope.route.prev, envelope.route.curr] if envelope.route.curr else list(envelope.route.prev)
        for hook in self.config.sink_hooks:
            copy = envelope.copy()
            copy.route = Route(prev=list(prev), curr=hook, next=[])
            copy.headers[hdr.SINK_HOOK] = {"hook": hook, "phase": phase}
            copy.status = Status(
                phase=Phase.PENDING.value,
                actor=hook,
                created_at=status.created_at or now,
                updated_at=now,
                deadline_at=status.deadline_at,
            )
            try:
                self._transport.send(hook, copy)
            except AsyaError as exc:
                errors.append(f"{hook}: {exc}")
        return errors


def _task_id(envelope: Envelope) -> str:
    """The task x-sink reports: ``x-asya-origin-id`` when present (an aggregator's output), else ``id`` (P-SINK-5)."""
    origin = envelope.headers.get(hdr.ORIGIN_ID)
    return origin if isinstance(origin, str) and origin else envelope.id


lambda_handler = lambda_entry(SinkRuntime)
