"""Reserved concurrency checked at synthesis, before CloudFormation would fail the deploy.

Lambda keeps :data:`~asya.manifest.blocks.UNRESERVED_CONCURRENCY` (100) of an account's concurrency quota unreserved:
a function whose reservation would leave less fails to deploy (``Specified ReservedConcurrentExecutions for function
decreases account's UnreservedConcurrentExecution below its minimum value``). The quota is the manifest's
``deployment.account_concurrency`` (default 1,000, AWS's default; new accounts may start lower, see Service Quotas).
:func:`concurrency_problems` sums what the mesh reserves, ``gateway.stream_reserved_concurrency`` and every actor's
``reserved_concurrency``, and names each setting when the sum leaves too little. Reservations of other stacks in the
account are not known here: the deploy can still fail on them.

The deadline backstop reserves executions of its own (GW-BACK-7) whenever the account's quota leaves room for them
after the manifest's reservations (:func:`backstop_reservation`): actors that take the whole unreserved pool then
cannot throttle it. It reserves its timer batches plus one for the sweep: :data:`BACKSTOP_TIMER_CONCURRENCY` batches,
or, for a declared ``capacity`` target, what the target's timers need (every task arms at most one, so timers come
due at up to the target rate, each costing :data:`BACKSTOP_SECONDS_PER_TIMER`), with the model's headroom; it falls
back to the smallest reservation when the account has no room for that. In an account too small to reserve anything
(a new account's quota of 10), it draws on the shared pool like every other function.
"""

from __future__ import annotations

import math
from typing import Final

from asya.capacity import HEADROOM, declared
from asya.manifest import Manifest
from asya.manifest.blocks import UNRESERVED_CONCURRENCY

__all__ = [
    "BACKSTOP_RESERVED_CONCURRENCY",
    "BACKSTOP_SECONDS_PER_TIMER",
    "BACKSTOP_TIMER_CONCURRENCY",
    "backstop_reservation",
    "concurrency_problems",
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


def concurrency_problems(manifest: Manifest) -> list[str]:
    """Why the mesh's reservations cannot deploy into an account of ``deployment.account_concurrency`` (``[]``:
    they can)."""
    reserved = reserved_settings(manifest)
    quota = manifest.deployment.account_concurrency
    room = quota - UNRESERVED_CONCURRENCY
    total = sum(reserved.values())
    if total == 0 or total <= room:  # reserving nothing deploys into any account, a new one's 10 included
        return []
    listed = ", ".join(f"{key}: {value}" for key, value in reserved.items())
    if room <= 0:
        fix = (
            f"an account whose quota is {quota} cannot reserve any concurrency; remove these settings, or raise the "
            "account's Lambda concurrency quota (Service Quotas) and set deployment.account_concurrency to it"
        )
    else:
        fix = (
            f"lower them to {room} together, or raise the account's Lambda concurrency quota (Service Quotas) and set "
            "deployment.account_concurrency to it"
        )
    return [
        f"reserved concurrency {total} ({listed}) would leave less than the {UNRESERVED_CONCURRENCY} AWS keeps "
        f"unreserved of deployment.account_concurrency: {quota}; {fix}"
    ]


def backstop_reservation(manifest: Manifest) -> int | None:
    """The backstop's reserved concurrency (its timer batches + 1, module docstring), or ``None`` when the account's
    quota has no room for even :data:`BACKSTOP_RESERVED_CONCURRENCY` after the manifest's own reservations and the
    executions AWS keeps unreserved. The timer event source runs at most the reservation less one."""
    room = manifest.deployment.account_concurrency - UNRESERVED_CONCURRENCY - sum(reserved_settings(manifest).values())
    batches = BACKSTOP_TIMER_CONCURRENCY
    if declared(manifest):
        need = math.ceil(manifest.capacity.target_rate * HEADROOM * BACKSTOP_SECONDS_PER_TIMER)
        batches = min(_MAX_EVENT_SOURCE_CONCURRENCY, max(BACKSTOP_TIMER_CONCURRENCY, need))
    for wanted in (batches + 1, BACKSTOP_RESERVED_CONCURRENCY):
        if room >= wanted:
            return wanted
    return None
