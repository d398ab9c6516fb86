"""Reserved concurrency checked at synthesis, before CloudFormation would fail the deploy.

Lambda keeps :data:`~asya.manifest.blocks.UNRESERVED_CONCURRENCY` (100) of an account's concurrency quota unreserved:
a function whose reservation would leave less fails to deploy (``Specified ReservedConcurrentExecutions for function
decreases account's UnreservedConcurrentExecution below its minimum value``). The quota is the manifest's
``deployment.account_concurrency`` (default 1,000, AWS's default; new accounts may start lower, see Service Quotas).
:func:`concurrency_problems` sums what the mesh reserves, ``gateway.stream_reserved_concurrency`` and every actor's
``reserved_concurrency``, and names each setting when the sum leaves too little. Reservations of other stacks in the
account are not known here: the deploy can still fail on them.

The deadline backstop's own reservation (GW-BACK-7) is sized in :mod:`asya.capacity.backstop`, which the capacity
model shares.
"""

from __future__ import annotations

from asya.capacity.backstop import reserved_settings
from asya.manifest import Manifest
from asya.manifest.blocks import UNRESERVED_CONCURRENCY

__all__ = ["concurrency_problems"]


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
