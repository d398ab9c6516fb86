"""x-sump: the last resort for infrastructure errors and failures (PROTOCOL section 12.2, P-SUMP-1..5).

Per record: it accepts any route, never writes status and never sends (P-SUMP-1).

- A body that does not parse is logged raw and stored at ``failed/{YYYY-MM-DD}/sqs-{messageId}.json`` (today's UTC
  date) as ``{"message_id", "error", "raw_body"}`` (chosen: the raw body may not be JSON), create-if-absent (P-SUMP-5).
- Otherwise the whole envelope is logged as one JSON line, at ERROR for phase ``failed`` else INFO; a payload over
  200 KiB is logged as ``{"__truncated__": true, "size_bytes": n}`` (P-SUMP-3). Phase ``failed`` is checkpointed at
  the failed key with ``If-None-Match: *``, keeping a checkpoint x-sink already wrote; any other write failure fails
  the record (P-SUMP-4). A payload reference, and one in ``payload.original_payload``, is read back first, so the
  checkpoint holds the payload itself (P-LARGE-4).
- Then one EMF metric ``FailedEnvelopes`` (count 1, namespace ``Asya``, dimensions ``Namespace``, ``Actor`` =
  ``status.actor`` else ``unknown``, ``Reason`` = ``status.reason`` else ``None``) is printed (P-SUMP-2); emitted after
  the checkpoint so a retried record is counted once.

Environment: ``asya.config`` (``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_BUCKET``).
"""

from __future__ import annotations

import os
from typing import Any, Final

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from asya.config import ActorConfig
from asya.envelope import Envelope, Phase, Reason, dumps, parse_envelope
from asya.exceptions import EnvelopeParseError
from asya.timeutil import Clock, system_clock
from asya_crew.checkpoint import checkpoint_key, put_checkpoint
from asya_crew.runtime import CrewRuntime

__all__ = ["LOG_PAYLOAD_LIMIT", "METRIC_NAME", "METRIC_NAMESPACE", "SumpRuntime", "lambda_handler"]

METRIC_NAME: Final = "FailedEnvelopes"
METRIC_NAMESPACE: Final = "Asya"
#: A CloudWatch log event holds at most 256 KB: larger payloads are logged as a marker (P-SUMP-3).
LOG_PAYLOAD_LIMIT: Final = 200 * 1024


class SumpRuntime(CrewRuntime):
    """The x-sump Lambda runtime; clients are created lazily when not injected. x-sump sends nothing, so ``sqs``
    is used only to release unstarted records."""

    def __init__(
        self,
        config: ActorConfig,
        *,
        sqs: Any = None,
        dynamodb: Any = None,
        s3: Any = None,
        clock: Clock = system_clock,
        logger: Any = None,
    ) -> None:
        del dynamodb  # accepted for the common runtime signature: x-sump never writes status (P-SUMP-1)
        super().__init__(config, sqs=sqs, s3=s3, clock=clock, logger=logger)

    def _record(self, record: SQSRecord) -> None:
        body = record.body or ""
        try:
            envelope = parse_envelope(body)
        except EnvelopeParseError as exc:
            self._unparseable(record.message_id, body, exc)
            return
        self._envelope_keys(envelope)
        status = envelope.status
        phase = status.phase if status is not None else Phase.PENDING.value
        log = self._log.error if phase == Phase.FAILED.value else self._log.info
        log("envelope reached x-sump", extra={"correlation_id": envelope.id, "envelope": _loggable(envelope)})
        if phase == Phase.FAILED.value:
            key = checkpoint_key(envelope, Phase.FAILED.value, now=self._clock())
            document = self._hydrated(envelope).to_json()  # P-LARGE-4: the payload, not a reference to it
            if not put_checkpoint(self.s3, self.config.bucket, key, document, if_absent=True):
                self._log.info("checkpoint already present: kept", extra={"checkpoint_key": key})
        actor = status.actor if status is not None and status.actor else "unknown"
        reason = status.reason if status is not None and status.reason else "None"
        self._metric(actor, reason)

    def _unparseable(self, message_id: str, body: str, error: EnvelopeParseError) -> None:
        raw = body.encode("utf-8")[:LOG_PAYLOAD_LIMIT].decode("utf-8", errors="ignore")
        self._log.error("body is not a valid envelope", extra={"raw_body": raw, "error": str(error)})
        key = f"{Phase.FAILED.value}/{self._clock().date().isoformat()}/sqs-{message_id}.json"
        document = dumps({"message_id": message_id, "error": str(error), "raw_body": body})
        put_checkpoint(self.s3, self.config.bucket, key, document, if_absent=True)
        self._metric("unknown", Reason.PARSE_ERROR.value)

    def _metric(self, actor: str, reason: str) -> None:
        dimensions = {"Namespace": self.config.namespace, "Actor": actor, "Reason": reason}
        with single_metric(
            name=METRIC_NAME, unit=MetricUnit.Count, value=1, namespace=METRIC_NAMESPACE, default_dimensions=dimensions
        ):
            pass


def _loggable(envelope: Envelope) -> dict[str, Any]:
    """The envelope with a payload over 200 KiB replaced by a size marker (P-SUMP-3)."""
    out = envelope.to_dict()
    size = len(dumps(out["payload"]).encode("utf-8"))
    if size > LOG_PAYLOAD_LIMIT:
        out["payload"] = {"__truncated__": True, "size_bytes": size}
    return out


_RUNTIME: SumpRuntime | None = None


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The x-sump Lambda entry point; the runtime is built from ``os.environ`` on the first call."""
    global _RUNTIME  # noqa: PLW0603 - one runtime per Lambda container
    if _RUNTIME is None:
        _RUNTIME = SumpRuntime(ActorConfig.from_env(os.environ))
    return _RUNTIME.handle(event, context)
