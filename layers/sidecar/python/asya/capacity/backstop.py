"""The deadline backstop's reserved concurrency (docs/http.md GW-BACK-7), sized once for the deployment and the
capacity model. Pure.

Lambda keeps :data:`~asya.manifest.blocks.UNRESERVED_CONCURRENCY` of an account's quota unreserved. The backstop
reserves executions of its own whenever the quota (``deployment.account_concurrency``) leaves room for them after the
manifest's reservations (:func:`reserved_settings`), so actors that take the whole unreserved pool cannot throttle it.
It reserves its timer batches plus one for the sweep: :data:`BACKSTOP_TIMER_CONCURRENCY` batches or, for a declared
``capacity`` target, what the target's timers need (every task arms at most one, so timers come due at up to the
target rate, each costing :data:`BACKSTOP_SECONDS_PER_TIMER`), with the model's headroom; it falls back to the
smallest reservation when the account has no room for that. In an account too small to reserve anything (a new
account's quota of 10) it draws on the shared pool like every other function. The deployment sets the reservation
(``asya_cdk``); the capacity model takes it out of the pool the actors share (:mod:`asya.capacity.model`).
"""

from __future__ import annotations

import math
from typing import Final

from asya.capacity.target import HEADROOM, declared
from asya.manifest import Manifest
from asya.manifest.blocks import UNRESERVED_CONCURRENCY

__all__ = [
    "BACKSTOP_RESERVED_CONCURRENCY",
    "BACKSTOP_SECONDS_PER_TIMER",
    "BACKSTOP_TIMER_CONCURRENCY",
    "backstop_reservation",
    "backstop_wanted",
    "reserved_settings",
]

#: Concurrent batches of the backstop's timer event source (chosen; 2 is the least an SQS event source allows): about
#: 200 due timers a second at 10 per batch and ~50 ms per batch; a backlog of timers only makes timeouts late.
BACKSTOP_TIMER_CONCURRENCY: Final = 2
#: The backstop's smallest reservation: its timer batches plus one execution for the long-deadline sweep.
BACKSTOP_RESERVED_CONCURRENCY: Final = BACKSTOP_TIMER_CONCURRENCY + 1
#: Busy seconds per due timer (an estimate: one strongly consistent read of a small item, most timers finding their
#: task ended, a tenth of a batch's invocation overhead).
BACKSTOP_SECONDS_PER_TIMER: Final = 0.01
_MAX_EVENT_SOURCE_CONCURRENCY: Final = 1000


def reserved_settings(manifest: Manifest) -> dict[str, int]:
    """Every reservation of ``manifest`` by its manifest key."""
    out: dict[str, int] = {}
    if manifest.gateway.stream_reserved_concurrency is not None:
        out["gateway.stream_reserved_concurrency"] = manifest.gateway.stream_reserved_concurrency
    for actor in manifest.deployed_actors():
        if actor.reserved_concurrency is not None:
            out[f"actors.{actor.name}.reserved_concurrency"] = actor.reserved_concurrency
    return out


def backstop_wanted(manifest: Manifest) -> int:
    """The reservation the backstop asks for when the account has room: its timer batches (for a declared target,
    what the target's timers need) plus one for the sweep."""
    batches = BACKSTOP_TIMER_CONCURRENCY
    if declared(manifest):
        need = math.ceil(manifest.capacity.target_rate * HEADROOM * BACKSTOP_SECONDS_PER_TIMER)
        batches = min(_MAX_EVENT_SOURCE_CONCURRENCY, max(BACKSTOP_TIMER_CONCURRENCY, need))
    return batches + 1


def backstop_reservation(manifest: Manifest) -> int | None:
    """The backstop's reserved concurrency (its timer batches + 1, module docstring), or ``None`` when the account's
    quota has no room for even :data:`BACKSTOP_RESERVED_CONCURRENCY` after the manifest's own reservations and the
    executions AWS keeps unreserved. The timer event source runs at most the reservation less one."""
    # a declared quota (deployment.quotas.lambda_concurrency) is the account's, as the capacity model reads it
    quota = manifest.deployment.quotas.get("lambda_concurrency", manifest.deployment.account_concurrency)
    room = quota - UNRESERVED_CONCURRENCY - sum(reserved_settings(manifest).values())
    for wanted in (backstop_wanted(manifest), BACKSTOP_RESERVED_CONCURRENCY):
        if room >= wanted:
            return wanted
    return None
