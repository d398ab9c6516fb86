"""What every route needs: configuration, manifest, task store, transport, deadline timers, clock (held in
``app.state.gateway``).

Blocking boto3 calls run in Starlette's worker threads (:meth:`GatewayContext.call`) so one slow AWS call never
stalls the event loop, and with it every open SSE stream.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from asya.manifest import Manifest
from asya.payloads import PayloadStore
from asya.programstore import ProgramStore
from asya.store import TaskStore
from asya.timeutil import Clock
from asya.transport import Transport
from asya_gateway.admission import Admission
from asya_gateway.config import GatewayConfig
from asya_gateway.sse import SseSettings
from asya_gateway.timers import DeadlineTimers

__all__ = ["GatewayContext", "context_of"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class GatewayContext:
    config: GatewayConfig
    manifest: Manifest
    store: TaskStore
    transport: Transport
    clock: Clock
    #: Arms deadline timers (GW-BACK-1) at create and resume.
    timers: DeadlineTimers
    #: The bucket's offloaded payloads: a retry from a recorded step copies its input into the new task's folder.
    payloads: PayloadStore
    #: CloudWatch client for the queue diagnostic (created on first use when ``None``).
    cloudwatch: Any = None
    #: Set when the server that runs this app is about to stop (:func:`asya_gateway.app.drain`): SSE streams end at
    #: their next poll, as at their 840 s limit, so clients resume with ``Last-Event-ID`` instead of being cut.
    draining: threading.Event = field(default_factory=threading.Event)
    #: Keeps every flow program a task starts with (P-FLOWV-3); ``None``: nothing is kept (no bucket).
    programs: ProgramStore | None = None
    #: GW-OVL-7: refuses creates behind a backlog their deadline cannot wait out (``None``: no drain rates configured)
    admission: Admission | None = None

    @property
    def sse_settings(self) -> SseSettings:
        c = self.config
        return SseSettings(
            poll_fast=c.sse_poll_fast,
            poll_slow=c.sse_poll_slow,
            fast_window=c.sse_fast_window,
            keepalive=c.sse_keepalive,
            max_seconds=c.sse_max_seconds,
            gap_wait=c.sse_gap_wait,
            poll_max=2 * c.sse_poll_slow,
        )

    async def call(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """Run a blocking call in a worker thread."""
        return await run_in_threadpool(functools.partial(fn, *args, **kwargs))


def context_of(request: Request) -> GatewayContext:
    context = request.app.state.gateway
    assert isinstance(context, GatewayContext)
    return context
