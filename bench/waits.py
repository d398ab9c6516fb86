"""What a durable wait costs (P-WAIT-2..5): a flow's ``sleep``, and a pause or ``wait_for`` with a timeout, priced from
the requests the code makes (``bench/prices.toml``), against a Lambda held for the same time. Pure.

The request vector of a wait of ``S`` seconds, from ``asya_crew.resume`` (the wake and the expiry take the same path):
the wait rides SQS in ``n = max(1, ceil(S / 900))`` legs. Each leg is one x-resume invocation: one Lambda request,
the event source's ``ReceiveMessage`` and ``DeleteMessage`` (counted one each: conservative, the pollers batch them),
one strongly consistent ``GetItem`` of the task (1 read unit: a task that ended stops its wait there), and, for every
leg but the last, one ``SendMessage`` back to x-resume's own queue; an invocation lasts its AWS calls
(``assumptions.call_ms``) at x-resume's memory. The send that starts the wait replaces the send the flow makes
anyway, and the send after it is the next hop's; neither is counted. No function runs between legs: a wait holds no
compute.

A pause's expiry is sent when the pause begins; a leg that finds the pause over acks, so a pause answered early
pays the legs up to its answer plus one, and one that times out pays the legs of its timeout (the default cap,
``max_pause`` 7 days, is 672 legs).

The comparison a user makes: the same wait inside a function (``time.sleep`` in a Lambda: its memory for ``S``
seconds, up to Lambda's 900 s limit, so a longer wait is not possible there at all) and Step Functions Standard's
``Wait`` state (one transition, whatever the time).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

from bench.cost import PER_MILLION, PriceTable

__all__ = ["LEG_SECONDS", "WAITS", "WaitCost", "held_lambda_cost", "table", "wait_cost"]

#: SQS's longest ``DelaySeconds``: one leg of a wait.
LEG_SECONDS: Final = 900
#: x-resume's memory (the crew's default in the manifest).
CREW_MEMORY_MB: Final = 256
#: Lambda's longest invocation: a wait longer than this cannot be held in a function.
LAMBDA_MAX_SECONDS: Final = 900
#: The waits the table prices: a minute, a leg, an hour, a day, the default pause cap.
WAITS: Final = (60, 900, 3600, 86_400, 7 * 86_400)


@dataclass(frozen=True, slots=True)
class WaitCost:
    """USD per million waits of ``seconds``: the mesh's (``legs`` x-resume invocations), a Lambda holding the wait
    (``None`` past Lambda's 900 s limit) and Step Functions Standard's ``Wait`` state."""

    seconds: int
    legs: int
    lambda_requests: int
    sqs_requests: int
    read_units: int
    gb_seconds: float
    mesh_usd: float
    held_lambda_usd: float | None
    sfn_wait_usd: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wait_cost(seconds: int, prices: PriceTable, *, memory_mb: int = CREW_MEMORY_MB) -> WaitCost:
    """The mesh's cost of one wait of ``seconds``, per million waits (see the module's request vector)."""
    if seconds < 1:
        raise ValueError(f"seconds must be >= 1, got {seconds!r}")
    legs = max(1, math.ceil(seconds / LEG_SECONDS))
    sqs = legs * 2 + (legs - 1)  # receive + delete per leg, a re-send for every leg but the last
    reads = legs
    leg_ms = prices.call_ms["dynamodb"] + prices.call_ms["sqs"]  # a leg that is not due: its read and its re-send
    last_ms = prices.call_ms["dynamodb"]  # the last leg: its read (the onward send is the next hop's)
    gb_seconds = ((legs - 1) * leg_ms + last_ms) / 1000 * memory_mb / 1024
    usd = (
        legs * prices.each("lambda_request")
        + sqs * prices.each("sqs_request")
        + reads * prices.each("dynamodb_read_request_unit")
        + gb_seconds * prices.each("lambda_arm_gb_second")
    )
    return WaitCost(
        seconds=seconds,
        legs=legs,
        lambda_requests=legs,
        sqs_requests=sqs,
        read_units=reads,
        gb_seconds=gb_seconds,
        mesh_usd=usd * PER_MILLION,
        held_lambda_usd=held_lambda_cost(seconds, prices, memory_mb=memory_mb),
        sfn_wait_usd=prices.each("sfn_standard_transition") * PER_MILLION,
    )


def held_lambda_cost(seconds: int, prices: PriceTable, *, memory_mb: int = CREW_MEMORY_MB) -> float | None:
    """USD per million waits spent inside a function of ``memory_mb`` (``None`` past Lambda's 900 s limit)."""
    if seconds > LAMBDA_MAX_SECONDS:
        return None
    gb_seconds = seconds * memory_mb / 1024
    return (prices.each("lambda_request") + gb_seconds * prices.each("lambda_arm_gb_second")) * PER_MILLION


def table(prices: PriceTable) -> dict[str, Any]:
    """The bench report's rows: one per wait of :data:`WAITS`."""
    return {
        "memory_mb": CREW_MEMORY_MB,
        "rows": [wait_cost(seconds, prices).to_dict() for seconds in WAITS],
    }
