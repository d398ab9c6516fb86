"""The HTTP reporter (P-STAT-18): a layer's status, progress and FLY reports posted to the gateway's producer
route (GW-EVT-1..9) instead of written to the task store, for actors that run outside AWS.

:class:`HttpReporter` stands in for :class:`asya.reporting.Reporter` and posts the same events, in the same progress
modes (P-STAT-19), as ``POST {base}/api/v1/mesh/{task id}/events`` bodies ``{"type": "status", "status", "data"}``:

| call | body | when |
|---|---|---|
| ``received`` | ``status`` ``received``, ``data`` ``{prev, curr, next, message_size_kb}`` | ``detailed`` |
| ``claim`` | ``status`` ``processing``, ``data`` ``{prev, curr, next}`` | ``hops``, ``detailed`` |
| ``completed`` | ``status`` ``completed``, ``data`` adds ``duration_ms``, ``frames`` | ``detailed`` |
| ``retrying`` | ``status`` ``retrying``, ``data`` adds ``attempt``, ``delay_seconds``, ``error`` | tracked roots |
| ``final_failed`` | nothing: x-sump writes ``failed`` (GW-EVT-3, P-SUMP-6); logged at WARNING | never |
| ``fly`` | one ``{"type": "fly", "data": value}`` per value | always |

Such actors claim no hop (P-ACK-7, P-ACK-8): :meth:`HttpReporter.claim` posts the ``processing`` event and lets the
call go on; there is no fence, lease or release. Every post is queued and sent by a background thread
(``asya.httpreport.client``), so no reporter failure changes how an envelope is handled and the handler never waits on
the reporter more than 100 ms: status callbacks return at once; a FLY flush waits up to 100 ms for its values to leave
(the call's last flush precedes its frame 0, and a value arriving after the task's terminal write would be dropped),
and after one such wait times out, later flushes do not wait until the gateway has caught up.

Pre-flight (P-STAT-10) reads ``GET {base}/api/v1/mesh/{id}`` (2 s timeout) for every tracked envelope of a batch at
once, before the first record runs; :meth:`HttpReporter.preflight` answers in the shape of the store's pre-flight
(task items keyed like ``TaskStore.fence_key``, holding ``status`` only) so ``asya.claims`` applies its rules unchanged:
``canceled``/``paused`` go to x-sink, a root of a ``succeeded``/``failed`` task is a duplicate. A status it could not
read is unknown and processing continues.

``base`` per envelope (``asya.gatewayurl``): its ``x-asya-gateway-url`` header when it passes the SSRF guard,
else ``ASYA_GATEWAY_URL``, else reporting is off for that envelope. The bases of a batch are learnt at pre-flight, which
sees every envelope before any report; a refused header is logged at WARNING. Error texts are cut to 1 KiB and actor
names to 256 characters (the route's limits, GW-EVT-5); a FLY value over 256 KiB encoded is replaced by
``{"__truncated__": true, "size_bytes": n}`` (P-STAT-17).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from asya import headers as hdr
from asya.envelope import Envelope, dumps
from asya.gatewayurl import gateway_base, is_gateway_url
from asya.httpreport.client import GatewayClient, StatusRead
from asya.reporting import Fence, HopRef, ProgressMode, Reporter
from asya.store import ApplyResult, Outcome
from asya.store.limits import clip_text

if TYPE_CHECKING:
    from asya.store import TaskStore

__all__ = ["FLY_LIMIT_BYTES", "HttpReporter"]

#: GW-EVT-5 bounds of the producer route: ``data.error`` 1 KiB, ``data.curr``/``data.failed_actor`` 256 characters.
_ERROR_LIMIT_BYTES: Final = 1024
_NAME_LIMIT: Final = 256
#: P-STAT-17: a single FLY value over this many bytes encoded is logged as a truncation marker.
FLY_LIMIT_BYTES: Final = 256 * 1024

_PreflightItems = dict[tuple[str, str], dict[str, Any]]


class HttpReporter(Reporter):
    """Reports of one actor posted to the gateway; ``default_base`` is ``ASYA_GATEWAY_URL`` (``""``: none)."""

    writes_final = False

    def __init__(
        self,
        store: TaskStore,
        *,
        actor: str,
        logger: logging.Logger | Any,
        gateway: GatewayClient,
        default_base: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # the store is only asked for its pre-flight key layout (``fence_key``): nothing is read from or written to it
        super().__init__(store, actor=actor, logger=logger, sleep=sleep)
        self._gateway = gateway
        self._default = default_base
        self._bases: dict[str, str | None] = {}

    @property
    def gateway(self) -> GatewayClient:
        return self._gateway

    # -- pre-flight -------------------------------------------------------------------------------------------------

    def preflight(self, envelopes: Iterable[Envelope | None]) -> _PreflightItems:
        """P-STAT-10 over HTTP for one batch; also learns each task's base for the batch's reports."""
        self._bases = {}
        reads: dict[str, StatusRead] = {}
        for env in envelopes:
            if env is None or hdr.is_stealth(env.headers) or hdr.is_hook_copy(env.headers):
                continue
            base = self._base_of(env)
            task_id = env.parent_id or env.id
            self._bases[env.id] = self._bases[task_id] = base
            if base is not None and task_id not in reads:
                reads[task_id] = StatusRead(base=base, task_id=task_id, envelope_id=env.id)
        if not reads:
            return {}
        statuses = self._gateway.read_statuses(list(reads.values()))
        out: _PreflightItems = {}
        for task_id, status in statuses.items():
            if status is not None:
                key = self._store.fence_key(task_id, None)
                out[(key["pk"]["S"], key["sk"]["S"])] = {"status": {"S": status}}
        return out

    def _base_of(self, env: Envelope) -> str | None:
        named = env.headers.get(hdr.GATEWAY_URL)
        if named is not None and not is_gateway_url(named):
            self._log.warning(
                "x-asya-gateway-url refused: not an absolute http(s) URL with a host",
                extra={"envelope_id": env.id, "value": repr(named)[:200], "fallback": self._default or None},
            )
        return gateway_base(named, self._default)

    # -- the Reporter interface -------------------------------------------------------------------------------------

    def received(self, hop: HopRef, mode: ProgressMode, message_size_kb: float) -> None:
        if mode is ProgressMode.DETAILED:
            self._status(hop, "received", self._route(hop, message_size_kb=message_size_kb))

    def claim(
        self,
        fence: Fence,
        hop: HopRef | None,
        mode: ProgressMode,
        *,
        lease_until: int,
        message_size_kb: float,
        history: tuple[str, str | None] | None = None,
    ) -> ApplyResult:
        """No hop claim (P-ACK-8): the ``processing`` event, then the call goes on."""
        if hop is not None and mode is not ProgressMode.FINAL:
            self._status(hop, "processing", self._route(hop))
        return ApplyResult(Outcome.ACCEPTED, status="running")

    def release(self, fence: Fence) -> None:
        """Nothing was claimed, so nothing is released."""

    def completed(self, hop: HopRef, mode: ProgressMode, duration_ms: int, frames: int) -> None:
        if mode is ProgressMode.DETAILED:
            self._status(hop, "completed", self._route(hop, duration_ms=duration_ms, frames=frames))

    def retrying(
        self, hop: HopRef | None, fence: Fence | None, *, attempt: int, delay_seconds: int, error: str
    ) -> None:
        if hop is not None:
            data = self._route(
                hop, attempt=attempt, delay_seconds=delay_seconds, error=clip_text(error, _ERROR_LIMIT_BYTES)
            )
            self._status(hop, "retrying", data)

    def final_failed(
        self, hop: HopRef, *, error: str, error_details: Mapping[str, Any] | None, writer_id: str | None = None
    ) -> None:
        """The producer route refuses ``failed`` (GW-EVT-3: the crew writes it): the x-sump envelope the layer
        already sent is this error's record and asks x-sump to write the final status (P-SUMP-6)."""
        self._log.warning(
            "final status not reported: the gateway takes failed from the crew only, x-sump writes it",
            extra={"task_id": hop.task_id, "error": clip_text(error, _ERROR_LIMIT_BYTES)},
        )

    def fly(self, task_id: str, envelope_id: str, values: Sequence[Any]) -> None:
        base = self._bases.get(task_id, self._default or None)
        if base is None:
            return
        for value in values:
            try:
                body = dumps({"type": "fly", "data": value}).encode("utf-8")
            except (TypeError, ValueError) as exc:  # values arrive JSON-ready (P-ABI-19); never fail the hop
                self._log.warning("FLY value not posted", extra={"task_id": task_id, "error": str(exc)})
                continue
            if len(body) > FLY_LIMIT_BYTES:
                self._log.warning("FLY value truncated", extra={"task_id": task_id, "size_bytes": len(body)})
                marker = {"__truncated__": True, "size_bytes": len(body)}
                body = dumps({"type": "fly", "data": marker}).encode("utf-8")
            self._gateway.post(base, task_id, envelope_id, body)
        # the call's last flush comes right before its frame 0 leaves: a value posted after the task's terminal write
        # would be dropped as stale, so the values get up to 100 ms (once per gateway stall) to arrive first
        self._gateway.settle()

    # -- helpers ----------------------------------------------------------------------------------------------------

    def _route(self, hop: HopRef, **extra: Any) -> dict[str, Any]:
        route = hop.route
        curr = (route.curr or self._actor)[:_NAME_LIMIT]  # the logical name under a route override (P-ROUTE-7)
        return {"prev": list(route.prev), "curr": curr, "next": list(route.next), **extra}

    def _status(self, hop: HopRef, status: str, data: Mapping[str, Any]) -> None:
        base = self._bases.get(hop.task_id, self._default or None)
        if base is None:
            return
        try:
            body = dumps({"type": "status", "status": status, "data": data}).encode("utf-8")
        except (TypeError, ValueError) as exc:
            self._log.warning("status event not posted", extra={"task_id": hop.task_id, "error": str(exc)})
            return
        self._gateway.post(base, hop.task_id, hop.envelope_id, body)
