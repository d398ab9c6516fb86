"""x-pause: stop a tracked task for human input (P-PAUSE-1..6; P-ACK-8's crew fence; GW-DATA-2).

Per record, after the regular steps (``asya_crew.routed``: parse, route check, pre-flight, SLA check):

- an untracked envelope (stealth, hook copy, fan-out child, or no task record) is rejected: ``x-pause requires a task
  tracked by the gateway`` (P-PAUSE-2, P-CREW-1); so is invalid pause metadata (P-PAUSE-3, ``asya.pausing``);
- pre-flight: a ``succeeded``/``failed`` task or a stored fence above this hop's is a duplicate (acked, nothing
  written); a ``canceled`` task goes to x-sink (P-STAT-10); a ``paused`` task holding this hop's fence is a redelivery
  that completes the file (below);
- then, in this order (P-PAUSE-5): (1) the ``PAUSE`` item (``pause_metadata`` and the fence ``(h, a)``); (2) the
  status write ``paused`` with ``remaining_seconds = floor(deadline_at - now)`` (``null`` without a deadline), which
  removes the task's ``deadline_at`` (the backstop drops its timer, GW-BACK-5) and is the hop claim; (3) the file
  ``paused/{id}.json`` (P-PAUSE-4). A claim refused by a higher fence (a resume raised it, P-RESUME-1) or a finished
  task writes nothing more: no orphan file. A refusal by a ``paused`` task holding this fence (a redelivery after (2))
  stores the file when it is missing: a conditional ``PutObject`` (``If-None-Match: *``) that keeps a file already
  there. x-pause never reads the file: no ``HeadObject``, so no dependence on S3's 404, which needs a bucket-wide
  ``s3:ListBucket`` grant (``asya_deploy.access``).
- then (4), for a pause whose metadata has a ``timeout``, its expiry is sent to x-resume, delayed until it is due
  (P-WAIT-2); and (5), for a ``wait_for`` (metadata ``event``), a signal of the event buffered before the pause is
  delivered at once (P-WAIT-5): the resume's write under this pause's fence, the send to x-resume, the removal of
  the buffered signal. A redelivery that finds its own pause does (4) and (5) again. Nothing else is sent
  (P-PAUSE-6); the record is acked once the file exists. Any write or send error fails the record.

Write units per pause: the pause item and the task item, 1 each for items under 1 KB (GW-DATA-8).
Environment: ``asya.config`` (``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_TABLE``, ``ASYA_BUCKET``).
"""

from __future__ import annotations

import json
from typing import Any, Final

from botocore.exceptions import ClientError

from asya import headers as hdr
from asya import naming, pausing, routing
from asya.envelope import Envelope
from asya.exceptions import AsyaError, HopHeldError, SerializationError
from asya.resiliency import deferral
from asya.store import Outcome, StatusUpdate, signals
from asya.timeutil import parse_ts
from asya.transport import TransportError
from asya_crew.entry import lambda_entry
from asya_crew.routed import RoutedCrewRuntime, StopRecord, status_of

__all__ = ["NOT_TRACKED", "PauseRuntime", "PausedFileError", "lambda_handler"]

NOT_TRACKED: Final = "x-pause requires a task tracked by the gateway"
#: P-ACK-8: the claim's lease runs past the Lambda's timeout by this much.
_LEASE_MARGIN_MS: Final = 10_000
_FINISHED: Final = frozenset({"succeeded", "failed"})
#: S3's answers to a conditional put whose object exists (another delivery stored the file meanwhile).
_ALREADY_STORED: Final = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


class PausedFileError(AsyaError):
    """``paused/{id}.json`` could not be stored (no bucket, or S3 refused): the record fails and comes back."""


class PauseRuntime(RoutedCrewRuntime):
    """The x-pause Lambda runtime."""

    def _decide(self, envelope: Envelope) -> None:
        self._check_route(envelope)
        if hdr.is_stealth(envelope.headers) or hdr.is_hook_copy(envelope.headers) or envelope.parent_id:
            self._reject(envelope, NOT_TRACKED)
        fence = (len(envelope.route.prev) + 1, routing.entry_attempt(envelope, self.config.actor))
        task = self._task_item(envelope.id)
        if task is None:
            self._reject(envelope, NOT_TRACKED)
        self._preflight(envelope, task, fence)
        self._check_sla(envelope)
        try:
            metadata = pausing.parse_metadata(envelope.headers.get(hdr.PAUSE))
        except pausing.PauseMetadataError as exc:
            self._reject(envelope, str(exc))
        payload = self._payload(envelope)
        now = self._clock()
        status = envelope.status
        remaining = pausing.remaining_seconds(status.deadline_at if status else None, now)
        self._store.put_pause_item(envelope.id, pause_metadata=metadata.to_dict(), fence=fence)
        lease_until = int(now.timestamp() * 1000) + int(self.config.actor_timeout * 1000) + _LEASE_MARGIN_MS
        result = self._store.pause(
            envelope.id,
            actor=self.config.actor,
            pause_metadata=metadata.to_dict(),
            remaining_seconds=remaining,
            claim=(*fence, lease_until),
            envelope_id=envelope.id,
            created_at=status.created_at if status else None,
        )
        if result.outcome is Outcome.ACCEPTED:
            document = pausing.paused_document(envelope, payload, metadata, now=now, remaining=remaining)
            self._put_file(envelope.id, document, only_if_missing=False)
            self._arm_expiry(envelope.id, fence, metadata)
            self._log.info("task paused", extra={"remaining_seconds": remaining})
            self._deliver_buffered(envelope.id, fence, metadata)
            return
        if result.outcome is Outcome.NOT_FOUND:
            self._reject(envelope, NOT_TRACKED)
        if result.outcome is Outcome.HELD:
            # another run's live claim on this very hop: the record comes back and finds the task paused or free
            raise HopHeldError(f"hop {fence} of {envelope.id!r} is held by another run", remaining_seconds=1)
        if result.status == "paused":
            self._complete_redelivery(envelope, fence, payload, metadata, remaining)
            return
        if result.status == "canceled":
            self._stop_if_canceled(envelope, result.status)
        self._log.info("duplicate delivery: nothing written", extra={"task_status": result.status})

    def _preflight(self, envelope: Envelope, task: dict[str, Any], fence: tuple[int, int]) -> None:
        status = status_of(task)
        self._stop_if_canceled(envelope, status)
        stored = self._store.fence_of(task)
        if status in _FINISHED or (stored is not None and stored > fence):
            self._log.info("duplicate delivery: acked without a write", extra={"task_status": status})
            raise StopRecord
        if status == "paused":
            if stored == fence:
                self._complete_redelivery(envelope, fence, None, None, None)
            else:
                self._log.info("task is paused by another hop: acked", extra={"task_status": status})
            raise StopRecord

    def _complete_redelivery(
        self,
        envelope: Envelope,
        fence: tuple[int, int],
        payload: Any,
        metadata: pausing.PauseMetadata | None,
        remaining: int | None,
    ) -> None:
        """A redelivery that finds the task paused: with this hop's fence it stores the file when it is missing
        (P-PAUSE-5); under another fence it writes nothing."""
        task = self._task_item(envelope.id)
        if task is None or status_of(task) != "paused" or self._store.fence_of(task) != fence:
            self._log.info("task paused by another hop: nothing written")
            return
        if metadata is None:
            metadata = pausing.parse_metadata(envelope.headers.get(hdr.PAUSE))
        if payload is None:
            payload = self._payload(envelope)
        if remaining is None:
            stored_remaining = task.get("remaining_seconds", {}).get("N")
            remaining = int(stored_remaining) if stored_remaining is not None else None
        document = pausing.paused_document(envelope, payload, metadata, now=self._clock(), remaining=remaining)
        if self._put_file(envelope.id, document, only_if_missing=True):
            self._log.info("redelivery stored the missing paused file")
        else:
            self._log.info("redelivery of a completed pause: acked")
        # the run that paused may have stopped before its expiry was sent: a second one only finds the pause over
        self._arm_expiry(envelope.id, fence, metadata)
        self._deliver_buffered(envelope.id, fence, metadata)

    def _deliver_buffered(self, task_id: str, fence: tuple[int, int], metadata: pausing.PauseMetadata) -> None:
        """P-WAIT-5: a ``wait_for`` whose event was signaled before it waited takes the buffered signal at once:
        the resume's write (only while this pause holds the task) and its send to x-resume, then the buffered
        signal is removed. A failed send sets the task back to paused (as GW-RESUME-4) and fails the record."""
        if metadata.event is None:
            return
        task = self._task_item(task_id)
        if task is None or status_of(task) != "paused" or self._store.fence_of(task) != fence:
            return
        found, data = signals.buffered_signal(task, metadata.event)
        if not found:
            return
        remaining_av = task.get("remaining_seconds")
        remaining = int(float(remaining_av["N"])) if isinstance(remaining_av, dict) and "N" in remaining_av else None
        now = self._clock()
        update, deadline_at = pausing.resume_write(
            task_id, seconds=remaining, now=now, message=f"Signal '{metadata.event}' delivered", pause_fence=fence
        )
        if not self._store.apply(task_id, update).accepted:
            self._log.info("buffered signal: the pause already ended", extra={"event": metadata.event})
            return
        # no request to take trace headers from: the resume goes on in the trace the task's headers carry
        resume = pausing.resume_envelope(task_id, data, seconds=remaining, deadline_at=deadline_at, now=now, trace={})
        try:
            self._transport.send(naming.RESUME, resume)
        except (TransportError, SerializationError):
            back = StatusUpdate(
                status="paused",
                pause_metadata=metadata.to_dict(),
                remaining_seconds=remaining,
                message="Signal not dispatched",
                envelope_id=task_id,
            )
            self._store.apply(task_id, back)
            raise
        signals.take_signal(self._store.dynamodb, self._store.table, task_id, metadata.event)
        self._log.info("buffered signal delivered", extra={"event": metadata.event})

    def _arm_expiry(self, task_id: str, fence: tuple[int, int], metadata: pausing.PauseMetadata) -> None:
        """P-WAIT-2: a pause with a timeout sends x-resume its expiry, delivered when the timeout comes (SQS delay,
        chained past 900 s). A failed send fails the record: the redelivery finds the task paused and sends it."""
        if metadata.timeout is None:
            return
        now = self._clock()
        expiry = pausing.PauseExpiry(
            fence=fence, seconds=metadata.timeout, due_at=pausing.expiry_due(now, metadata.timeout)
        )
        delay = deferral(parse_ts(expiry.due_at), now) or 0
        self._transport.send(naming.RESUME, pausing.expiry_envelope(task_id, expiry, now=now), delay_seconds=delay)
        self._log.info("pause expiry armed", extra={"timeout_seconds": metadata.timeout, "due_at": expiry.due_at})

    def _bucket(self) -> str:
        if not self.config.bucket:
            raise PausedFileError("ASYA_BUCKET is not set: x-pause cannot store the paused envelope")
        return self.config.bucket

    def _put_file(self, task_id: str, document: dict[str, Any], *, only_if_missing: bool) -> bool:
        """Store the paused file; False when ``only_if_missing`` found one already there (kept as it is)."""
        extra = {"IfNoneMatch": "*"} if only_if_missing else {}
        try:
            self.s3.put_object(
                Bucket=self._bucket(),
                Key=pausing.paused_key(task_id),
                Body=json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8"),
                ContentType="application/json",
                **extra,
            )
        except ClientError as exc:
            if only_if_missing and exc.response["Error"]["Code"] in _ALREADY_STORED:
                return False
            raise PausedFileError(f"could not store {pausing.paused_key(task_id)}: {exc}") from exc
        return True


lambda_handler = lambda_entry(PauseRuntime)
