"""Admission: refuse new tasks while the first actor's backlog would outlast their deadline (docs/http.md GW-OVL-7).

A task created behind a backlog its first actor cannot drain before the task's deadline would only time out, after
costing its writes and sends. So, for an actor with a modelled drain rate (tasks per second it takes off its queue,
``ASYA_ADMISSION_DRAIN_RATES``, which the deployment derives from its capacity model), a create is answered 429 with
``Retry-After`` while

    ApproximateNumberOfMessages of the actor's queue / drain rate  >  ADMISSION_DEADLINE_SHARE * the task's timeout

SQS reports no age of a queue's messages through its API, so the depth is what is read: one ``GetQueueAttributes``
per queue, cached :data:`DEPTH_CACHE_SECONDS` (a gateway container asks at most once per 5 s per queue, whatever its
request rate). A task without a timeout, or whose first actor has no drain rate, is always admitted. A depth that
cannot be read admits the task (the check must not turn an SQS hiccup into refusals).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.overload import Overload
from asya.transport import Transport, TransportError
from asya_gateway.errors import OverloadError

__all__ = ["ADMISSION_DEADLINE_SHARE", "DEPTH_CACHE_SECONDS", "Admission"]

_log = logging.getLogger("asya_gateway.admission")

#: The share of a task's timeout its first actor's backlog may take (chosen: the rest is for the route's other hops).
ADMISSION_DEADLINE_SHARE: Final = 0.5
#: How long a queue depth read is used (the issue's bound: at most 5 s).
DEPTH_CACHE_SECONDS: Final = 5.0


class Admission:
    """The admission check of one gateway; ``drain_rates``: tasks per second by actor name."""

    def __init__(
        self,
        transport: Transport,
        drain_rates: Mapping[str, float],
        *,
        retry_after: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transport = transport
        self._rates = dict(drain_rates)
        self._retry_after = retry_after
        self._monotonic = monotonic
        self._depths: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def check(self, actor: str, timeout_seconds: float | None) -> None:
        """Raise :class:`OverloadError` 429 when a task for ``actor`` with ``timeout_seconds`` must wait too long."""
        rate = self._rates.get(actor)
        if rate is None or timeout_seconds is None:
            return
        depth = self._depth(actor)
        if depth is None:
            return
        wait, budget = depth / rate, ADMISSION_DEADLINE_SHARE * timeout_seconds
        if wait > budget:
            reason = (
                f"actor {actor!r} has {depth} tasks waiting, about {wait:.0f} s of work, over the {budget:.0f} s "
                "a new task may wait"
            )
            raise OverloadError(Overload.THROTTLED, self._retry_after, reason=reason)

    def _depth(self, actor: str) -> int | None:
        now = self._monotonic()
        with self._lock:
            cached = self._depths.get(actor)
            if cached is not None and now - cached[0] < DEPTH_CACHE_SECONDS:
                return cached[1]
        try:
            url = self._transport.queue_url(actor)
            attributes: Any = self._transport.sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            depth = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        except (ClientError, BotoCoreError, TransportError, KeyError, ValueError) as exc:
            _log.warning("queue depth of %s not read, task admitted: %s", actor, exc)
            return None
        with self._lock:
            self._depths[actor] = (now, depth)
        return depth
