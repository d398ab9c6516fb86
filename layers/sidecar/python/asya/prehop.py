"""The steps between a parsed envelope and its handler call, written once for the layer and the routable crew.

Each step answers a :class:`Verdict` when it decides the record, or ``None`` when the record goes on:

- :func:`refusal`: the route check (P-ROUTE-1, ``RouteMismatch``) and, for actors with a ceiling, the hop ceiling
  (P-HOP-1, ``HopCeiling``): the envelope goes to x-sump unrun;
- :func:`preflight`: the task's stored status (P-STAT-10): a canceled or paused task's envelope goes to x-sink, a
  succeeded or failed one (or a fence the store already passed) makes the record a duplicate, acked as it is;
- :func:`sla`: less than :data:`SLA_MARGIN` to ``deadline_at`` (P-TIME-3): x-sink with reason ``Timeout``, which
  writes the final ``failed`` status.

A verdict names what to send (``out``: an x-sink envelope; ``reason`` and ``message``: an x-sump refusal, whose
envelope the caller builds because the layer also reports the final status, P-ERR-6) and the one line to log.
:func:`decide` applies a verdict for callers that only send (the crew). No I/O here: callers read the task item and
own the clients.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from asya import routing
from asya.envelope import Envelope, Reason
from asya.hops import ceiling_message, over_ceiling
from asya.timeutil import format_ts, parse_ts

__all__ = ["SLA_MARGIN", "Verdict", "deadline_of", "decide", "preflight", "refusal", "sla"]

#: P-TIME-3: less than this left before ``deadline_at`` and the handler is not called.
SLA_MARGIN: Final = timedelta(seconds=1)

#: The logger method a verdict's line goes through.
_Level = Literal["info", "warning", "error"]

_STOPPED: Final = frozenset({"canceled", "paused"})
_DUPLICATE: Final = frozenset({"duplicate", "succeeded", "failed"})


class Verdict:
    """A record decided before its handler call (a plain class: no dataclass methods to generate at cold start)."""

    __slots__ = ("extra", "level", "log", "message", "out", "reason")

    def __init__(
        self,
        log: str,
        *,
        level: _Level = "info",
        out: routing.Outgoing | None = None,
        reason: Reason | None = None,
        message: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.log = log
        self.level = level
        self.out = out  # the envelope to send (x-sink); None with ``reason`` set, or for an ack
        self.reason = reason  # an x-sump refusal's reason; the caller builds and sends its envelope
        self.message = message
        self.extra = extra


def deadline_of(env: Envelope) -> datetime | None:
    """``status.deadline_at`` of ``env``, parsed; ``None`` when it has none."""
    return parse_ts(env.status.deadline_at) if env.status is not None else None


def refusal(env: Envelope, actor: str, max_hops: int | None = None) -> Verdict | None:
    """P-ROUTE-1, then P-HOP-1 when ``max_hops`` is given: the reason to send ``env`` to x-sump unrun."""
    mismatch = routing.route_mismatch(env, actor)
    if mismatch is not None:
        return Verdict(
            f"{Reason.ROUTE_MISMATCH.value}: sent to x-sump",
            level="error",
            reason=Reason.ROUTE_MISMATCH,
            message=mismatch,
        )
    if max_hops is not None and over_ceiling(env.headers, max_hops):  # a runaway loop stops here
        return Verdict(
            f"{Reason.HOP_CEILING.value}: sent to x-sump",
            level="error",
            reason=Reason.HOP_CEILING,
            message=ceiling_message(max_hops),
        )
    return None


def preflight(env: Envelope, task_status: str | None, *, actor: str, now: str, trace: routing.Trace) -> Verdict | None:
    """P-STAT-10 on the task's status as read (or a claim's answer, ``asya.claims.Claimed``): canceled or paused to
    x-sink; ``duplicate``, ``succeeded`` or ``failed``: acked without a handler call; anything else goes on."""
    if task_status in _STOPPED:
        out = routing.preflight_envelope(env, task_status, actor=actor, now=now, trace=trace)
        return Verdict("task is not running: sent to x-sink", out=out, extra={"task_status": task_status})
    if task_status in _DUPLICATE:
        return Verdict("duplicate delivery: acked without a handler call", extra={"task_status": task_status})
    return None


def sla(
    env: Envelope,
    deadline: datetime | None,
    now_dt: datetime,
    *,
    actor: str,
    trace: routing.Trace,
    now: str | None = None,
) -> Verdict | None:
    """P-TIME-3: less than :data:`SLA_MARGIN` before ``deadline``: to x-sink with reason ``Timeout`` (x-sink writes
    the final status: one write fewer than the actor writing it too, and the checkpoint is linked). ``now``: the
    stamp of ``now_dt``, formatted here when not given (only an expired envelope needs it)."""
    if deadline is None or deadline - now_dt >= SLA_MARGIN:
        return None
    out = routing.sla_envelope(env, actor=actor, now=format_ts(now_dt) if now is None else now, trace=trace)
    return Verdict("SLA deadline expired: sent to x-sink", level="warning", out=out)


def decide(
    env: Envelope,
    verdict: Verdict,
    *,
    actor: str,
    now: str,
    trace: routing.Trace,
    send: Callable[[routing.Outgoing], object],
    logger: Any,
    new_id: Callable[[], str] = routing.new_uuid4,
) -> None:
    """Apply ``verdict`` with ``send`` (required: a failing send raises and fails the record, P-ERR-5) and log it.
    An x-sump refusal carries the input payload as received (P-ERR-4)."""
    out = verdict.out
    if verdict.reason is not None:
        out = routing.sump_envelope(
            reason=verdict.reason,
            message=verdict.message,
            actor=actor,
            now=now,
            envelope=env,
            trace=trace,
            original_payload=env.payload,
            new_id=new_id,
        )
    if out is not None:
        send(out)
    extra = dict(verdict.extra or {})
    if verdict.reason is not None:
        extra["error"] = verdict.message
    getattr(logger, verdict.level)(verdict.log, extra=extra or None)
