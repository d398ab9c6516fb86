"""Reserved concurrency checked at synthesis, before CloudFormation would fail the deploy.

Lambda keeps :data:`~asya.manifest.blocks.UNRESERVED_CONCURRENCY` (100) of an account's concurrency quota unreserved:
a function whose reservation would leave less fails to deploy (``Specified ReservedConcurrentExecutions for function
decreases account's UnreservedConcurrentExecution below its minimum value``). The quota is the manifest's
``deployment.account_concurrency`` (default 1,000, AWS's default; new accounts may start lower, see Service Quotas).
:func:`concurrency_problems` sums what the mesh reserves, ``gateway.stream_reserved_concurrency`` and every actor's
``reserved_concurrency``, and names each setting when the sum leaves too little. Reservations of other stacks in the
account are not known here: the deploy can still fail on them.
"""

from __future__ import annotations

from asya.manifest import Manifest
from asya.manifest.blocks import UNRESERVED_CONCURRENCY

__all__ = ["concurrency_problems", "reserved_settings"]


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
    if total <= room:
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
