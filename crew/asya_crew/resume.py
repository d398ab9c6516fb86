"""x-resume: send a paused task on with the resume input merged in (P-RESUME-2..6).

The gateway's resume (``asya_gateway.routes.resume``) switched the task ``paused -> running`` and raised its fence
(P-RESUME-1); that write is x-resume's fence, so x-resume claims nothing and writes no status (P-ACK-8, P-RESUME-2).
Per record, after the regular steps (``asya_crew.routed``: parse, route check, SLA check):

- ``x-asya-resume-task`` must be present and equal to ``id``, else the task is rejected (P-CREW-1);
- pre-flight (P-STAT-10): a ``canceled`` task goes to x-sink; a ``paused`` one (paused again: this resume is stale),
  a finished one or an unknown id is acked without a send;
- ``paused/{id}.json`` is loaded; a missing file (a 404, or a 403 that ``asya.missingkey`` finds is one) means the
  resume was already delivered: warning, ack (P-RESUME-3);
- the input (the payload) is merged into the stored payload (P-RESUME-4, ``asya.pausing.merge_input``); a bad merge
  is rejected;
- the restored envelope goes on under the task's own id (P-RESUME-5): its route the stored ``next`` (x-sink with
  ``Completed`` when empty), its deadline ``now + x-asya-resume-timeout`` when that header is present;
- a restored envelope whose route is exhausted while a compiled flow is in progress goes on as the flow's
  continuation (P-FLOW-7), under the resume's fence, with the program the task started with (its digest, read from
  the program store when x-resume does not hold it, P-FLOWV-3): a pause survives deploys;
- after the send, the file is deleted (a delete failure is logged) and the record acked (P-RESUME-6). The delete is
  conditional on the ETag of the file it loaded (``IfMatch``): the restored envelope may reach a second ``x-pause``
  of the same task before this delete, and that pause's new file must stay.

A flow's sleep (header ``x-asya-wake``, P-WAIT-3) arrives here once per 900 s leg: a canceled task's goes to x-sink
and a finished one's is acked (so a sleep stops with its task), one whose ``x-asya-delay-until`` is still ahead is
sent back to this queue, a deadline that passed during the sleep fails the task (P-TIME-3); otherwise the rest of the
flow runs as the end of this hop, and what it sends is absorbed by the next hop's claim when a copy of the wake runs
it twice.

A pause's expiry (header ``x-asya-pause-expiry``, sent by x-pause for a pause with a timeout, P-WAIT-2) is acked at
any leg that finds the pause over (resumed, canceled, paused again elsewhere), and otherwise re-sent to this queue
while its ``x-asya-delay-until`` is ahead (P-RES-9). When due, it applies only to the pause it names
(the stored fence is that pause's ``(hop, attempt)`` and the task is still ``paused``): ONE conditional write
``paused -> running`` (the resume's write, with ``pause_timed_out_at``; a resume that won the race makes it fail, and
the expiry is acked), then ``TimeoutError`` is raised at the pause (``asya.flows.mesh.on_pause_timeout``): the flow's
``except TimeoutError`` goes on, else the task fails with reason ``Timeout``. A redelivery after that write finds the
task running under the expiry's fence with the paused file still there, and sends again (the next hop's claim absorbs
a copy).

Environment: ``asya.config`` (``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_TABLE``, ``ASYA_BUCKET``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
from asya import naming, pausing, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows.interp import STATE_HEADER
from asya.flows.mesh import continue_outgoing, on_pause_timeout
from asya.missingkey import is_missing
from asya.resiliency import deferral
from asya.store.updates import RESUMED_ATTEMPT
from asya.timeutil import format_ts, parse_ts
from asya_crew.entry import lambda_entry
from asya_crew.routed import RoutedCrewRuntime, status_of

__all__ = ["ResumeRuntime", "lambda_handler"]


class ResumeRuntime(RoutedCrewRuntime):
    """The x-resume Lambda runtime."""

    def _decide(self, envelope: Envelope) -> None:
        self._check_route(envelope)
        if hdr.WAKE in envelope.headers:
            self._wake(envelope)
            return
        task_id = envelope.headers.get(hdr.RESUME_TASK)
        if task_id != envelope.id:
            self._reject(envelope, f"x-resume: header {hdr.RESUME_TASK} must equal the envelope id, got {task_id!r}")
        try:
            expiry = pausing.expiry_of(envelope.headers)
        except pausing.PauseMetadataError as exc:
            self._reject(envelope, str(exc))
        if expiry is not None:
            self._expire(envelope, expiry)
            return
        task = self._task_item(envelope.id)
        status = status_of(task)
        self._stop_if_canceled(envelope, status)
        if status not in ("pending", "running"):
            self._log.info("stale resume: acked without a send", extra={"task_status": status})
            return
        self._check_sla(envelope)
        loaded = self._load(envelope.id)
        if loaded is None:
            self._log.warning("paused envelope not found: the resume was already delivered; acked")
            return
        document, etag = loaded
        given = self._payload(envelope)
        try:
            payload = pausing.merge_input(document, given)
        except pausing.ResumeMergeError as exc:
            self._reject(envelope, str(exc))
        timeout = _timeout(envelope.headers.get(hdr.RESUME_TIMEOUT))
        trace = {k: v for k, v in envelope.headers.items() if k in (hdr.TRACEPARENT, hdr.TRACESTATE)}
        destination, out = pausing.restored_envelope(
            document, payload, trace_headers=trace, now=self._clock(), timeout=timeout
        )
        now = format_ts(self._clock())
        if destination == naming.SINK and STATE_HEADER in out.headers:  # x-resume ran the hop that ends the route
            out.route = Route(prev=[*out.route.prev, out.route.curr], curr="", next=[])
        self._flows.load(out.headers)  # the program of the task's digest (P-FLOWV-3); a failed read fails the record
        for item in continue_outgoing(self._flows.book, routing.Outgoing(destination, out), now=now):
            self._transport.send(item.actor, item.envelope)  # a compiled flow goes on here (P-FLOW-7)
        self._log.info("task resumed", extra={"destination": destination})
        self._delete(envelope.id, etag)

    def _wake(self, envelope: Envelope) -> None:
        """P-WAIT-3: a flow's sleep is over: run the rest of the flow on the envelope, as the end of this hop."""
        now = self._clock()
        status = status_of(self._task_item(envelope.id))
        self._stop_if_canceled(envelope, status)
        if status not in ("pending", "running"):
            self._log.info("wake of a task that is not running: acked", extra={"task_status": status})
            return
        wait = deferral(parse_ts(envelope.headers.get(hdr.DELAY_UNTIL)), now)
        if wait is not None:  # a task that ended meanwhile stops its sleep at the next leg (above)
            self._transport.send(naming.RESUME, envelope, delay_seconds=wait)
            self._log.info("sleep not over: re-sent to own queue", extra={"delay_seconds": wait})
            return
        self._check_sla(envelope)  # the task's deadline ran during the sleep (P-WAIT-3)
        headers = {k: v for k, v in envelope.headers.items() if k not in (hdr.WAKE, hdr.DELAY_UNTIL)}
        status_in = envelope.status or Status()
        woken = Envelope(
            id=envelope.id,
            parent_id=envelope.parent_id,
            route=Route(prev=[*envelope.route.prev, naming.RESUME], curr="", next=[]),
            payload=self._payload(envelope),
            headers=headers,
            status=Status(
                phase=Phase.SUCCEEDED.value,
                reason=Reason.COMPLETED.value,
                actor=naming.RESUME,
                created_at=status_in.created_at,
                updated_at=format_ts(now),
                deadline_at=status_in.deadline_at,
            ),
        )
        self._flows.load(headers)  # the program of the task's digest (P-FLOWV-3); a failed read fails the record
        for item in continue_outgoing(self._flows.book, routing.Outgoing(naming.SINK, woken), now=format_ts(now)):
            self._transport.send(item.actor, item.envelope)
        self._log.info("sleep over: the flow goes on")

    def _expire(self, envelope: Envelope, expiry: pausing.PauseExpiry) -> None:
        """P-WAIT-2: end the pause ``expiry`` names with ``TimeoutError``, if nobody resumed it meanwhile."""
        now = self._clock()
        task = self._task_item(envelope.id)
        status = status_of(task)
        fence = self._store.fence_of(task) if task is not None else None
        expired_here = (
            task is not None
            and status == "running"
            and fence == (expiry.fence[0], RESUMED_ATTEMPT)
            and "pause_timed_out_at" in task
        )
        if not expired_here and (status != "paused" or fence != expiry.fence):
            self._log.info("pause expiry of a pause that ended: acked", extra={"task_status": status})
            return
        wait = deferral(parse_ts(envelope.headers.get(hdr.DELAY_UNTIL)), now)
        if wait is not None and not expired_here:  # a pause that ends meanwhile stops the chain at the next leg
            self._transport.send(naming.RESUME, envelope, delay_seconds=wait)
            self._log.info("pause expiry not due: re-sent to own queue", extra={"delay_seconds": wait})
            return
        loaded = self._load(envelope.id)
        if loaded is None:
            self._log.info("pause expiry: no paused envelope (the task went on): acked")
            return
        document, etag = loaded
        assert task is not None
        if expired_here:
            deadline_at = _text(task.get("deadline_at"))
        else:
            update, deadline_at = pausing.resume_write(
                envelope.id,
                seconds=_number(task.get("remaining_seconds")),
                now=now,
                message=f"Pause timed out after {expiry.seconds} s",
                pause_fence=expiry.fence,
                pause_timed_out=True,
            )
            if not self._store.apply(envelope.id, update).accepted:
                self._log.info("pause expiry lost the race to a resume or a cancel: acked")
                return
        paused = _paused_envelope(document)
        self._flows.load(paused.headers)  # the program of the task's digest (P-FLOWV-3); a failed read fails the record
        outgoing = on_pause_timeout(
            self._flows.book, paused, seconds=expiry.seconds, now=format_ts(now), deadline_at=deadline_at
        )
        for item in outgoing:
            self._transport.send(item.actor, item.envelope)
        self._log.info("pause timed out", extra={"timeout_seconds": expiry.seconds})
        self._delete(envelope.id, etag)

    def _load(self, task_id: str) -> tuple[dict[str, Any], str] | None:
        """The paused document and its ETag, or ``None`` when there is none."""
        bucket = self.config.bucket
        if not bucket:
            return None
        try:
            found = self.s3.get_object(Bucket=bucket, Key=pausing.paused_key(task_id))
        except ClientError as exc:
            if is_missing(self.s3, bucket, pausing.paused_key(task_id), exc):
                return None
            raise
        document = json.loads(found["Body"].read())
        if not isinstance(document, dict) or not isinstance(document.get("id"), str):
            raise ValueError(f"{pausing.paused_key(task_id)}: not a paused envelope")
        return document, str(found["ETag"])

    def _delete(self, task_id: str, etag: str) -> None:
        try:
            self.s3.delete_object(Bucket=self.config.bucket, Key=pausing.paused_key(task_id), IfMatch=etag)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "PreconditionFailed":
                self._log.info("the task paused again before the delete: its new paused envelope is kept")
                return
            self._log.warning("could not delete the paused envelope", extra={"error": str(exc)})
        except BotoCoreError as exc:
            self._log.warning("could not delete the paused envelope", extra={"error": str(exc)})


def _paused_envelope(document: Mapping[str, Any]) -> Envelope:
    """The envelope the paused file holds, as it arrived at x-pause (``route.prev`` ending with x-pause)."""
    route = document.get("route")
    prev = [str(a) for a in route.get("prev") or []] if isinstance(route, Mapping) else []
    status = document.get("status")
    created_at = status.get("created_at") if isinstance(status, Mapping) else None
    parent = document.get("parent_id")
    return Envelope(
        id=str(document["id"]),
        parent_id=parent if isinstance(parent, str) and parent else None,
        route=Route(prev=prev, curr="", next=[]),
        payload=document.get("payload"),
        headers=dict(document.get("headers") or {}),
        status=Status(created_at=created_at if isinstance(created_at, str) else None),
    )


def _text(value: object) -> str | None:
    return value.get("S") if isinstance(value, dict) else None


def _number(value: object) -> int | None:
    text = value.get("N") if isinstance(value, dict) else None
    return int(float(text)) if isinstance(text, str) else None


def _timeout(value: object) -> int | None:
    """``x-asya-resume-timeout``: integer seconds as a string; anything else means no deadline."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


lambda_handler = lambda_entry(ResumeRuntime)
