"""What the sidecar does after a handler error (P-RES-5..12) and with a chained delay (step 3 of P-PROC-2).

:class:`Retrier` asks the actor's policies (``asya.resiliency``) for a plan and sends one envelope; the send is
required (P-ACK-2): a failure propagates and fails the record, so SQS delivers it again. A handler error reaches
this module only when the call yielded no frame (P-RES-10: after a frame it is a partial failure, ``asya.handlercall``).
Duplicates are kept out by the hop claim (P-ACK-8): after a retry's send, the fence item gets the fence
``(h, n + 1)``, so a late duplicate of attempt ``n`` finds a higher fence and never starts a second retry chain
(P-RES-8).

- no policy (P-RES-4): x-sink, ``failed``/``RuntimeError``, the error payload (P-RES-11, P-RES-14);
- retry (P-RES-8): the same envelope (id, parent_id, unshifted route, entry headers with ``x-asya-first-attempt``,
  the input payload as received) with ``status = {retrying, actor, attempt: n + 1, max_attempts: policy, error}``
  to this actor's own queue with ``DelaySeconds``; a delay over 900 s is chained through ``x-asya-delay-until``
  (P-RES-9). Then the ``retrying`` status (tracked) and the fence ``(h, n + 1)`` in one write (P-RES-8, P-STAT-5);
- exhausted without ``on_exhausted``: x-sink, ``failed``/``PolicyExhausted`` (P-RES-11);
- no policy or exhausted without ``on_exhausted``, in a compiled flow inside a ``try`` whose clause matches:
  the clause's continuation instead (:meth:`Retrier.caught`, P-FLOW-9);
- exhausted with ``on_exhausted = [a1, ...]``: the route shifted onto the chain, ``failed``/``PolicyRouted``, sent
  to ``a1`` (or its override target, P-ROUTE-7) (P-RES-12). A destination without a queue is ``UnknownActor``: the
  envelope goes to x-sump and a tracked task is failed (P-ROUTE-8, P-ERR-4..6).

:meth:`Retrier.defer` is step 3: an envelope whose ``x-asya-delay-until`` is more than 1 s away is re-sent to the
own queue unchanged with the remaining delay (at most 900 s) and acked, with no status write and no attempt counted;
otherwise the header is removed and processing continues.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from asya import headers as hdr
from asya import routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows.interp import STATE_HEADER
from asya.flows.ir import Program
from asya.flows.mesh import on_failure
from asya.reporting import Fence, HopRef, Reporter
from asya.resiliency import RetryPlan, RetryPolicies, RetryPolicy, deferral, sqs_delay
from asya.timeutil import Clock, format_ts, parse_ts
from asya.transport import Transport, UnknownActorError

__all__ = ["Retrier", "retry_envelope", "routed_envelope"]


class Retrier:
    """The handler-error outcomes and the chained-delay step of one actor."""

    def __init__(
        self,
        *,
        actor: str,
        policies: RetryPolicies,
        transport: Transport,
        reporter: Reporter,
        logger: logging.Logger | Any,
        clock: Clock,
        random: Callable[[], float],
        flows: Mapping[str, Program] | None = None,
    ) -> None:
        self._actor = actor
        self._flows = flows if flows is not None else {}
        self._policies = policies
        self._transport = transport
        self._reporter = reporter
        self._log = logger
        self._clock = clock
        self._random = random

    def defer(self, envelope: Envelope, now: datetime) -> bool:
        """Step 3 of P-PROC-2 (P-RES-9): ``True`` when the envelope was re-sent and the record is done."""
        if hdr.DELAY_UNTIL not in envelope.headers:
            return False
        seconds = deferral(parse_ts(envelope.headers[hdr.DELAY_UNTIL]), now)
        if seconds is None:
            del envelope.headers[hdr.DELAY_UNTIL]
            return False
        self._transport.send(self._actor, envelope, delay_seconds=seconds)
        self._log.info("chained retry delay: re-sent to own queue", extra={"delay_seconds": seconds})
        return True

    def handler_error(
        self,
        entry: Envelope,
        details: Mapping[str, Any],
        *,
        payload: Any,
        report: HopRef | None,
        trace: routing.Trace,
        fence: Fence | None = None,
    ) -> None:
        """Section 8 for a handler error of attempt ``entry.status.attempt``; ``payload`` is the input as received;
        ``fence`` is the hop's claimed fence, advanced after a retry's send (P-RES-8)."""
        now_dt = self._clock()
        now = format_ts(now_dt)
        status = entry.status or Status()
        plan = self._policies.plan(
            details,
            attempt=status.attempt,
            now=now_dt,
            first_attempt=parse_ts(entry.headers.get(hdr.FIRST_ATTEMPT)),
            deadline=parse_ts(status.deadline_at),
            random=self._random,
        )
        message = details.get("message")
        final = plan.policy is None or (plan.exhausted and not plan.policy.on_exhausted)
        if final and self.caught(entry, details, reason=_final_reason(plan), payload=payload, trace=trace):
            return
        if plan.policy is None:
            out = routing.failure_envelope(
                entry, details, actor=self._actor, now=now, original_payload=payload, trace=trace
            )
            self._transport.send(out.actor, out.envelope)
            self._log.warning("handler error, no retry policy: sent to x-sink", extra={"error": message})
        elif not plan.exhausted:
            self._retry(
                entry, details, plan, plan.policy, payload=payload, report=report, trace=trace, now=now, fence=fence
            )
        elif plan.policy.on_exhausted:
            out = routed_envelope(
                entry, details, plan.policy, actor=self._actor, now=now, original_payload=payload, trace=trace
            )
            self._send_routed(out, entry, report, now, trace)
            self._log.warning(
                "retry policy exhausted: sent to on_exhausted",
                extra={"policy": plan.policy.name, "to": out.envelope.route.curr, "error": message},
            )
        else:
            out = routing.failure_envelope(
                entry,
                details,
                actor=self._actor,
                now=now,
                original_payload=payload,
                trace=trace,
                reason=Reason.POLICY_EXHAUSTED,
                max_attempts=plan.policy.max_attempts,
            )
            self._transport.send(out.actor, out.envelope)
            self._log.warning(
                "retry policy exhausted: sent to x-sink",
                extra={"policy": plan.policy.name, "attempt": status.attempt, "error": message},
            )

    def caught(
        self, entry: Envelope, details: Mapping[str, Any], *, reason: Reason, payload: Any, trace: routing.Trace
    ) -> bool:
        """P-FLOW-9: a final failure of a compiled flow's call that an ``except`` clause catches is sent on as that
        clause's continuation instead (``True``); ``False`` when nothing catches it."""
        if STATE_HEADER not in entry.headers:
            return False
        now = format_ts(self._clock())
        out = routing.failure_envelope(
            entry, details, actor=self._actor, now=now, original_payload=payload, trace=trace, reason=reason
        )
        caught = on_failure(self._flows, out, original_payload=payload, now=now)
        if caught is None:
            return False
        for item in caught:  # children first, the task's own envelope last (P-ROUTE-9)
            self._transport.send(item.actor, item.envelope)
        self._log.warning(
            "handler error caught by the flow's except clause",
            extra={"error": details.get("message"), "to": caught[-1].envelope.route.curr or caught[-1].actor},
        )
        return True

    def _retry(
        self,
        entry: Envelope,
        details: Mapping[str, Any],
        plan: RetryPlan,
        policy: RetryPolicy,
        *,
        payload: Any,
        report: HopRef | None,
        trace: routing.Trace,
        now: str,
        fence: Fence | None,
    ) -> None:
        attempt = (entry.status or Status()).attempt + 1
        until = format_ts(plan.delay_until) if plan.delay_until is not None else None
        out = retry_envelope(
            entry,
            details,
            actor=self._actor,
            now=now,
            attempt=attempt,
            max_attempts=policy.max_attempts,
            payload=payload,
            trace=trace,
            delay_until=until,
        )
        self._transport.send(self._actor, out, delay_seconds=plan.delay_seconds)
        delay = sqs_delay(plan.delay)
        self._log.warning(
            "handler error: retry scheduled",
            extra={"policy": policy.name, "attempt": attempt, "delay_seconds": delay, "error": details.get("message")},
        )
        if report is not None or fence is not None:
            error = routing.error_payload(details, None)["error"]
            self._reporter.retrying(report, fence, attempt=attempt, delay_seconds=delay, error=error)

    def _send_routed(
        self, out: routing.Outgoing, entry: Envelope, report: HopRef | None, now: str, trace: routing.Trace
    ) -> None:
        try:
            self._transport.send(out.actor, out.envelope)
        except UnknownActorError as exc:
            sump = routing.sump_envelope(
                reason=Reason.UNKNOWN_ACTOR,
                message=str(exc),
                actor=self._actor,
                now=now,
                envelope=entry,
                trace=trace,
                original_payload=out.envelope.payload,
            )
            self._transport.send(sump.actor, sump.envelope)
            self._log.error("on_exhausted destination unknown: sent to x-sump", extra={"error": str(exc)})
            if report is not None:
                details = {"message": str(exc), "type": Reason.UNKNOWN_ACTOR.value}
                self._reporter.final_failed(report, error=str(exc), error_details=details)


def _final_reason(plan: RetryPlan) -> Reason:
    return Reason.RUNTIME_ERROR if plan.policy is None else Reason.POLICY_EXHAUSTED


def retry_envelope(
    entry: Envelope,
    details: Mapping[str, Any],
    *,
    actor: str,
    now: str,
    attempt: int,
    max_attempts: int,
    payload: Any,
    trace: routing.Trace,
    delay_until: str | None = None,
) -> Envelope:
    """The retry of ``entry`` (P-RES-8), for this actor's own queue; ``delay_until`` chains a long delay (P-RES-9)."""
    status_in = entry.status or Status()
    headers = trace.headers(entry.headers)
    if delay_until is not None:
        headers[hdr.DELAY_UNTIL] = delay_until
    status = Status(
        phase=Phase.RETRYING.value,
        actor=actor,
        attempt=attempt,
        max_attempts=max_attempts,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=status_in.deadline_at,
        error=dict(details),
    )
    route = Route(list(entry.route.prev), entry.route.curr, list(entry.route.next))
    return Envelope(
        id=entry.id, route=route, payload=payload, parent_id=entry.parent_id, headers=headers, status=status
    )


def routed_envelope(
    entry: Envelope,
    details: Mapping[str, Any],
    policy: RetryPolicy,
    *,
    actor: str,
    now: str,
    original_payload: Any,
    trace: routing.Trace,
) -> routing.Outgoing:
    """An exhausted policy with ``on_exhausted`` (P-RES-12): the route shifted onto the chain, the error payload."""
    status_in = entry.status or Status()
    headers = trace.headers(entry.headers)
    route = entry.route.shifted(list(policy.on_exhausted))
    destination = routing.resolve_override(route.curr, headers, by=actor)
    status = Status(
        phase=Phase.FAILED.value,
        reason=Reason.POLICY_ROUTED.value,
        actor=actor,
        attempt=status_in.attempt,
        max_attempts=policy.max_attempts,
        created_at=status_in.created_at,
        updated_at=now,
        deadline_at=status_in.deadline_at,
        error=dict(details),
    )
    envelope = Envelope(
        id=entry.id,
        route=route,
        payload=routing.error_payload(details, original_payload),
        parent_id=entry.parent_id,
        headers=headers,
        status=status,
    )
    return routing.Outgoing(actor=destination, envelope=envelope)
