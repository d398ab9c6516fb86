"""The batch loop x-sink and x-sump share (PROTOCOL P-PROC-3: steps 1, 2 and 15 of P-PROC-2, P-ACK-1..3).

Records run one at a time in batch order through Powertools ``BatchProcessor`` (``EventType.SQS``); a record whose
handler raises is reported in ``batchItemFailures`` (with one WARNING line naming the error) and never affects the
others. Start rule (P-TIME-6) with budget ``B = 0`` for crew: the first record always starts; a later one starts only
while the Lambda has at least the 5 s safety margin left, otherwise it and every later record fail unstarted and are
made visible again at once (best effort).

Payload references (P-LARGE-4): :meth:`CrewRuntime._hydrated` reads them back for checkpoints and results; crew sends
go through the same offloading encoder as the layer's (``asya.payloads``), and, with ``ASYA_TRACING`` on, carry the
record's ``AWSTraceHeader`` like the layer's (P-TRACE-3, ``asya.xray``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya.batch import StartRule, UnstartedRecordError, log_failed_record
from asya.config import ActorConfig
from asya.envelope import Envelope, Phase
from asya.exceptions import AsyaError
from asya.payloads import PayloadStore, PayloadUnavailableError, is_reference
from asya.timeout import SAFETY_MARGIN_SECONDS
from asya.timeutil import Clock, system_clock
from asya.transport import Transport
from asya.xray import trace_headers

__all__ = ["SAFETY_MARGIN_SECONDS", "CrewRuntime", "UnstartedRecordError", "run_batch"]


class CrewRuntime:
    """What x-sink and x-sump share: config, clock, lazy S3 client, transport, logger and the batch loop. Subclasses
    implement ``_record``; clients are created lazily when not injected."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        sqs: Any = None,
        s3: Any = None,
        clock: Clock = system_clock,
        logger: Any = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._s3 = s3
        self._payloads = PayloadStore(bucket=config.bucket or None, threshold_kb=config.offload_threshold_kb, s3=s3)
        self._trace = trace_headers(config.tracing, environ)
        trace_header = self._trace.current if self._trace is not None else None
        self._transport = Transport(
            namespace=config.namespace,
            sqs=sqs,
            encoder=self._payloads.encode,
            trace_header=trace_header,
            account_id=config.account_id,
        )
        self._log = logger if logger is not None else Logger(service=config.queue_name, level=config.log_level or None)
        self._log_keys(actor=config.actor)

    def _log_keys(self, **keys: object) -> None:
        """Keys every later log line of this runtime carries (P-TRACE-4); a plain ``logging.Logger`` (tests) has
        none."""
        if isinstance(self._log, Logger):
            self._log.append_keys(**keys)

    def _envelope_keys(self, envelope: Envelope) -> None:
        """The log keys of one record (P-TRACE-4): correlation id = envelope id, attempt and phase."""
        status = envelope.status
        self._log_keys(
            correlation_id=envelope.id,
            attempt=status.attempt if status is not None else 1,
            phase=status.phase if status is not None else Phase.PENDING.value,
        )

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            import boto3

            self._s3 = boto3.client("s3")
        return self._s3

    def _hydrated(self, envelope: Envelope) -> Envelope:
        """A copy of ``envelope`` whose payload, and a reference in ``payload.original_payload``, are read back from S3
        for the checkpoint and the task's result (P-LARGE-4). Sends keep the envelope itself, references included
        (P-LARGE-5). A reference that cannot be read (``PayloadUnavailable``) is kept as it is, with a warning: the
        checkpoint still says where the payload was; any other S3 error fails the record."""
        payload = envelope.payload
        try:
            hydrated = self._payloads.rehydrate(payload)
            if isinstance(hydrated, dict) and is_reference(hydrated.get("original_payload")):
                hydrated = {**hydrated, "original_payload": self._payloads.rehydrate(hydrated["original_payload"])}
        except PayloadUnavailableError as exc:
            self._log.warning("payload reference not readable: kept as it is", extra={"error": str(exc)})
            return envelope
        return envelope if hydrated is payload else replace(envelope, payload=hydrated)

    def handle(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        """Process one SQS batch; ``{"batchItemFailures": [...]}`` (P-ACK-1)."""
        return run_batch(event, context, self._logged_record, release=self._release)

    def _record(self, record: SQSRecord) -> None:
        raise NotImplementedError

    def _logged_record(self, record: SQSRecord) -> None:
        if self._trace is not None:
            self._trace.begin(record.raw_event)
        try:
            self._record(record)
        except Exception as exc:  # re-raised: the record fails (P-ACK-3)
            log_failed_record(self._log, record.message_id, exc)
            raise

    def _release(self, receipt_handles: list[str]) -> None:
        try:
            self._transport.change_visibility(self.config.actor, receipt_handles, 0)
        except AsyaError as exc:  # best effort (P-TIME-6 SHOULD): the records come back after their timeout anyway
            self._log.warning("could not release unstarted records", extra={"error": str(exc)})


def run_batch(
    event: Mapping[str, Any],
    context: Any,
    record_handler: Callable[[SQSRecord], None],
    *,
    release: Callable[[list[str]], None],
) -> dict[str, Any]:
    """Run ``record_handler`` on every record; ``{"batchItemFailures": [...]}``. ``release`` gets the receipt handles
    of unstarted records."""
    start = StartRule(context)

    def handle(record: SQSRecord) -> None:
        start.admit(message_id=record.message_id, receipt_handle=record.receipt_handle)
        record_handler(record)

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=dict(event), record_handler=handle, processor=processor, context=context)
    if start.unstarted:
        release(start.unstarted)
    return dict(response)
