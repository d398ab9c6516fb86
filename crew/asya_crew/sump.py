"""x-sump: the last resort for infrastructure errors and failures (P-SUMP-1..8, P-STAT-2).

Per record: it accepts any route and never sends (P-SUMP-1). What it receives, and what it does with it:

| received | checkpoint (P-SUMP-4) | attach to the task (P-STAT-2) | log line (P-SUMP-3) |
|---|---|---|---|
| a failure x-sink forwarded (header ``x-asya-checkpointed``) | no: x-sink wrote it | no | ``task failed``, WARNING |
| a failed fan-in slice (``x-asya-fan-in``) | yes: x-sink wrote none | no; fails origin | ``task failed``, WARNING |
| a failed hook copy (``x-asya-sink-hook``) | yes | no: not the task's outcome | ``sink hook failed``, WARNING |
| a partial-failure notice (reason ``PartialFailure``, P-RES-10) | no | no | ``partial failure``, WARNING |
| any other phase ``failed`` envelope (an infrastructure error) | yes | yes | ``infrastructure error``, ERROR |
| another phase | no | no | ``envelope reached x-sump``, INFO |

- Checkpoints are lines of the invocation's JSON Lines objects (``asya_crew.checkpoint``), written before anything
  else of their records; a failed PUT fails every record of the object. A payload reference, and one in
  ``payload.original_payload``, is read back first, so the line holds the payload itself (P-LARGE-4).
- Attach: for a root envelope (no ``parent_id``) outside stealth mode, ``TaskStore.attach_checkpoint`` gives the task
  ``id`` its ``checkpoint_key``/``checkpoint_line`` when it has none, terminal or not (x-sump may run before the
  layer's final write), changing no status; an unknown id or a task with a checkpoint is left alone. A write error
  fails the record (the checkpoint line is then written again, in another object, by the redelivery).
- Final status (P-SUMP-6): an envelope whose ``status.error.final_by`` is ``x-sump``
  (``asya.routing.sump_writes_final``) comes from an actor that reports over HTTP, whose layer cannot write
  ``failed`` (GW-EVT-3). Instead of the attach, x-sump writes the task's final ``failed`` status (error
  ``status.error.message``, details ``{message, type}``, ``failed_actor`` ``status.actor``) with the checkpoint in one
  conditional write (``TaskStore.report_final``, tagged with the record's message id): a task already terminal only
  gets the checkpoint when it has none. A write error fails the record.
- A fan-out child (``parent_id``, not stealth) whose checkpointed failure ended its lineage
  (``asya.infra.ends_lineage``: not a notice whose frames went on, not a lost frame other than the input's own) never
  reaches x-sink's finish: before the checkpoint, x-sump marks its child item finished (``CrewRuntime._plan``,
  ``TaskStore.finish_child``, one write): ``failed``, ``status.actor``, its attempt, ``Type: message`` of
  ``status.error`` and the line reserved for it (P-SUMP-7, the child tree). A child another record finished
  before is a late copy: no checkpoint line. A write error fails the record.
- A failed fan-in slice that finished its child here (not a late copy) also fails the fan-in's task,
  ``x-asya-fan-in.origin_id``, unless stealth, with x-sink's own write for a failed slice
  (``CrewRuntime._fail_fan_in_origin``: ``failed``, ``failed_actor`` ``status.actor``, error ``child <id>: `` +
  message, no checkpoint), after the child's finish and the checkpoint: an infrastructure error of a child's hop never
  reaches x-sink, and its task would wait ``running`` for its deadline. The write is conditional: a task already
  terminal (the slice x-sink forwarded failed it already, or another slice did) stays as it is (P-SUMP-8). A
  write error fails the record.
- Every log line carries ``reason`` and ``error_type`` (``status.error.type``) and the whole envelope, a payload over
  200 KiB replaced by ``{"__truncated__": true, "size_bytes": n}``.
- A body that does not parse is logged raw at ERROR and stored at ``unparsed/{YYYY-MM-DD}/sqs-{messageId}.txt``
  (today's UTC date, ``text/plain``), create-if-absent so a redelivery keeps the first copy (P-SUMP-5).
- Then one EMF metric ``FailedEnvelopes`` (count 1, namespace ``Asya``, dimensions ``Namespace``, ``Actor`` =
  ``status.actor`` else ``unknown``, ``Reason`` = ``status.reason`` else ``None``) is printed (P-SUMP-2): the
  ``Reason`` dimension tells handler failures (``RuntimeError``, ``PolicyExhausted``, ...) from infrastructure ones.
  It is emitted last, so a retried record is counted once.

Environment: ``asya.config`` (``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_TABLE``, ``ASYA_BUCKET``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya import headers as hdr
from asya import routing
from asya.countmetric import METRICS_NAMESPACE, emit_count
from asya.envelope import Envelope, Phase, Reason, dumps
from asya.infra import ends_lineage
from asya_crew.checkpoint import CheckpointLine, put_unparsed
from asya_crew.entry import lambda_entry
from asya_crew.runtime import CrewRuntime, Parsed, Unparsed

__all__ = ["LOG_PAYLOAD_LIMIT", "METRIC_NAME", "METRIC_NAMESPACE", "SumpRuntime", "lambda_handler"]

METRIC_NAME: Final = "FailedEnvelopes"
METRIC_NAMESPACE: Final = METRICS_NAMESPACE
#: A CloudWatch log event holds at most 256 KB: larger payloads are logged as a marker (P-SUMP-3).
LOG_PAYLOAD_LIMIT: Final = 200 * 1024
_PARTIAL_FAILURE: Final = Reason.PARTIAL_FAILURE.value


class SumpRuntime(CrewRuntime):
    """The x-sump Lambda runtime; clients are created lazily when not injected. x-sump sends nothing, so ``sqs``
    is used only to release unstarted records; ``dynamodb`` to attach checkpoints (P-STAT-2) and finish children
    (P-SUMP-7) and fail a fan-in slice's origin (P-SUMP-8)."""

    def _checkpoint_phase(self, envelope: Envelope, phase: str) -> str | None:
        if phase != Phase.FAILED.value or hdr.CHECKPOINTED in envelope.headers or _reason(envelope) == _PARTIAL_FAILURE:
            return None
        return phase

    def _prepare(self, record: SQSRecord) -> Parsed | Unparsed:
        prepared = super()._prepare(record)
        if not isinstance(prepared, Parsed) or prepared.checkpoint_phase is None or prepared.hydrated is None:
            return prepared
        # a fan-out child whose failure ends here never reaches x-sink: its finish is x-sump's (P-SUMP-7)
        envelope = prepared.envelope
        return self._plan(record, prepared, ends_child=_ends_child(envelope), error=_child_error(envelope))

    def _unparsed(self, record: SQSRecord, prepared: Unparsed) -> None:
        self._unparseable(record.message_id, prepared.body, str(prepared.error))

    def _complete(self, record: SQSRecord, prepared: Parsed, checkpoint: CheckpointLine | None) -> None:
        envelope = prepared.envelope
        reason = _reason(envelope)
        fields: dict[str, Any] = {
            "correlation_id": envelope.id,
            "reason": reason,
            "error_type": _error_type(envelope),
            "envelope": _loggable(envelope),
        }
        if checkpoint is not None:
            fields.update(checkpoint_key=checkpoint.key, checkpoint_line=checkpoint.line)
        headers = envelope.headers
        if prepared.phase != Phase.FAILED.value:
            self._log.info("envelope reached x-sump", extra=fields)
        elif hdr.CHECKPOINTED in headers or hdr.FAN_IN in headers:
            self._log.warning("task failed", extra={**fields, "checkpointed": headers.get(hdr.CHECKPOINTED)})
            if hdr.FAN_IN in headers and checkpoint is not None and _ends_child(envelope):
                # an infrastructure error of a child's slice never reaches x-sink: its task fails here, as a handler
                # error's slice fails it there (P-SUMP-8); a slice x-sink forwarded finds it failed already
                self._fail_fan_in_origin(envelope, record.message_id)
        elif hdr.is_hook_copy(headers):
            self._log.warning("sink hook failed", extra={**fields, "hook": headers[hdr.SINK_HOOK]})
        elif reason == _PARTIAL_FAILURE:
            self._log.warning("partial failure", extra=fields)
        else:
            self._log.error("infrastructure error", extra=fields)
            if checkpoint is not None:
                self._attach(envelope, checkpoint, writer_id=record.message_id)
        status = envelope.status
        self._metric(status.actor if status is not None and status.actor else "unknown", reason or "None")

    def _checkpoint_overloaded(self, record: SQSRecord, prepared: Parsed) -> None:
        """P-SINK-8 for x-sump: S3 throttled the checkpoint of an infrastructure error whose task only x-sump can fail
        (P-SUMP-6): ``failed`` is written now, without a checkpoint, so the task never waits for its deadline
        while the record retries its PUT; the delivery whose PUT goes through attaches the line. Best effort."""
        envelope = prepared.envelope
        headers = envelope.headers
        if (
            prepared.phase != Phase.FAILED.value
            or hdr.CHECKPOINTED in headers
            or hdr.FAN_IN in headers
            or hdr.is_hook_copy(headers)
            or _reason(envelope) == _PARTIAL_FAILURE
            or envelope.parent_id
            or hdr.is_stealth(headers)
            or not routing.sump_writes_final(envelope)
        ):
            return
        try:
            self._fail_task(envelope, None, writer_id=record.message_id)
        except Exception as exc:  # the record fails and comes back either way
            self._log.warning("failed status not written ahead of the checkpoint: %s", exc)

    def _attach(self, envelope: Envelope, checkpoint: CheckpointLine, *, writer_id: str) -> None:
        """P-STAT-2: the task the layer failed (or is about to fail) for this infrastructure error points at the
        line; when the layer could not fail it (P-SUMP-6), the final ``failed`` status and the line are one
        write. A write error fails the record (P-SUMP-4)."""
        if envelope.parent_id or hdr.is_stealth(envelope.headers):
            return
        if routing.sump_writes_final(envelope):
            self._fail_task(envelope, checkpoint, writer_id=writer_id)
            return
        if not self._store.attach_checkpoint(envelope.id, key=checkpoint.key, line=checkpoint.line):
            self._log.debug("task unknown or already checkpointed: not attached", extra={"correlation_id": envelope.id})

    def _fail_task(self, envelope: Envelope, checkpoint: CheckpointLine | None, *, writer_id: str) -> None:
        status = envelope.status
        assert status is not None and status.error is not None  # sump_writes_final read them
        error = {k: v for k, v in status.error.items() if k in ("message", "type")}
        written = self._store.report_final(
            envelope.id,
            status="failed",
            error=str(error.get("message", "infrastructure error")),
            error_details=error,
            failed_actor=status.actor,
            checkpoint_key=None if checkpoint is None else checkpoint.key,
            checkpoint_line=None if checkpoint is None else checkpoint.line,
            envelope_id=envelope.id,
            created_at=status.created_at,
            writer_id=writer_id,
        )
        self._log.info(
            "final failed status written" if written else "task unknown or already final: failed not written",
            extra={"correlation_id": envelope.id},
        )

    def _unparseable(self, message_id: str, body: str, error: str) -> None:
        raw = body.encode("utf-8")[:LOG_PAYLOAD_LIMIT].decode("utf-8", errors="ignore")
        key = put_unparsed(self.s3, self.config.bucket, message_id, body, now=self._clock())
        self._log.error("body is not a valid envelope", extra={"raw_body": raw, "error": error, "stored_at": key})
        self._metric("unknown", Reason.PARSE_ERROR.value)

    def _metric(self, actor: str, reason: str) -> None:
        emit_count(METRIC_NAME, 1, {"Namespace": self.config.namespace, "Actor": actor, "Reason": reason})


def _ends_child(envelope: Envelope) -> bool:
    """The failure ended the lineage of ``envelope.id`` (``asya.infra.ends_lineage``), a hook copy's never does."""
    return not hdr.is_hook_copy(envelope.headers) and ends_lineage(envelope)


def _child_error(envelope: Envelope) -> str:
    """The error a child item keeps: ``Type: message`` of ``status.error`` (the infrastructure reason names it),
    else the error payload's ``error``."""
    error: Mapping[str, Any] | None = envelope.status.error if envelope.status is not None else None
    message = error.get("message") if isinstance(error, Mapping) else None
    if isinstance(message, str):
        kind = _error_type(envelope)
        return f"{kind}: {message}" if kind else message
    payload = envelope.payload if isinstance(envelope.payload, dict) else {}
    return payload["error"] if isinstance(payload.get("error"), str) else "infrastructure error"


def _reason(envelope: Envelope) -> str | None:
    status = envelope.status
    return status.reason if status is not None and status.reason else None


def _error_type(envelope: Envelope) -> str | None:
    error: Mapping[str, Any] | None = envelope.status.error if envelope.status is not None else None
    kind = error.get("type") if isinstance(error, Mapping) else None
    return kind if isinstance(kind, str) else None


def _loggable(envelope: Envelope) -> dict[str, Any]:
    """The envelope with a payload over 200 KiB replaced by a size marker (P-SUMP-3)."""
    out = envelope.to_dict()
    size = len(dumps(out["payload"]).encode("utf-8"))
    if size > LOG_PAYLOAD_LIMIT:
        out["payload"] = {"__truncated__": True, "size_bytes": size}
    return out


lambda_handler = lambda_entry(SumpRuntime)
