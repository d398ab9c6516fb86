"""A hop claim whose answer was lost is still the claim's (docs/http.md GW-OVL-5).

The claim's conditional ``UpdateItem`` wrote, its answer was lost (a read timeout under load) and the SDK sent it
again: the condition now fails on the claim's own fence and lease. Taking that for another run's live lease would
fail the record and hold the hop until its own lease ran out. A ``needs-retry`` hook on the actor's DynamoDB client
plays the lost answer: the SDK resends the same request right after it wrote.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.functional import actors
from tests.functional.actors import NOW, Context, envelope

pytestmark = pytest.mark.functional


class Harness(actors.Harness):
    def __init__(self, mesh: Any, clock: list[datetime]) -> None:
        super().__init__(mesh, "echo", module="claim_handlers", clock=lambda: clock[0])

    def handle(self, body: dict[str, Any]) -> list[str]:
        response = self.runtime.handle(self.event(body), Context())
        return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _forget_calls() -> None:
    handlers = sys.modules.get("claim_handlers")
    if handlers is not None:
        handlers.CALLS.clear()


@pytest.fixture
def harness(mesh: Any) -> Iterator[Harness]:
    """Calls recorded by earlier tests of the worker (other modules load ``claim_handlers`` too) are forgotten first."""
    _forget_calls()
    yield Harness(mesh, [NOW])
    _forget_calls()


def test_gw_ovl_5_a_claim_resent_after_it_wrote_goes_on_as_the_claims_holder(harness: Harness) -> None:
    harness.store.create_task(task_id="t-lost-claim", actor="normalize", payload={"text": "x"})
    lost: list[int] = []

    def lose_claim_answer(attempts: int, caught_exception: Any, request_dict: dict[str, Any], **_: Any) -> int | None:
        body = request_dict["body"].decode() if isinstance(request_dict["body"], bytes) else str(request_dict["body"])
        if lost or attempts > 1 or caught_exception is not None or "attribute_not_exists(#fence_h)" not in body:
            return None
        lost.append(attempts)
        return 0  # resend at once

    events = harness.mesh.aws.dynamodb.meta.events
    events.register("needs-retry.dynamodb.UpdateItem", lose_claim_answer, unique_id="lose-claim-answer")
    try:
        failed = harness.handle(envelope("t-lost-claim"))
    finally:
        events.unregister("needs-retry.dynamodb.UpdateItem", unique_id="lose-claim-answer")
    assert lost == [1], "the claim's answer was never lost: the test did not play its fault"
    assert failed == []  # not held off by its own lease
    assert len(sys.modules["claim_handlers"].CALLS) == 1
    assert [c["id"] for c in harness.drain("analyze")] == ["t-lost-claim"]
