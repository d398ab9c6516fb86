"""The per-task hop ceiling against moto (PROTOCOL P-HOP-1 (R3), ``asya.hops``): every send of the layer carries the
input's ``x-asya-hops`` plus one, fan-out children inherit it, a handler cannot reset it, and an envelope that
arrives at the ceiling fails its task through x-sump with ``hop ceiling N reached``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.functional.actors import NOW, Harness, envelope

pytestmark = pytest.mark.functional

HOPS = "x-asya-hops"


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, *, module: str = "hop_handlers", **env: str) -> Harness:
        return Harness(mesh, handler, module=module, clock=lambda: NOW, env=env)

    return make


def test_p_hop_1_a_loop_that_resends_to_itself_fails_at_the_ceiling(harness: Callable[..., Harness]) -> None:
    h = harness("again", ASYA_MAX_HOPS="4")
    h.store.create_task(task_id="t-loop", actor="normalize", payload={})
    pending = [envelope("t-loop", nxt=[])]
    counts: list[int] = []
    for _ in range(10):  # far more rounds than the ceiling allows: the loop must stop on its own
        if not pending:
            break
        (body,) = pending
        _, failed = h.run(body)
        assert failed == []
        pending = h.drain("normalize")
        counts += [out["headers"][HOPS] for out in pending]
    assert counts == [1, 2, 3, 4]
    (sump,) = h.drain("x-sump")
    assert sump["id"] == "t-loop"
    assert sump["status"]["phase"] == "failed"
    assert sump["status"]["reason"] == "HopCeiling"
    assert sump["payload"]["details"]["message"] == "hop ceiling 4 reached"
    assert sump["headers"][HOPS] == 5
    task = h.store.get_task("t-loop")
    assert task is not None
    assert task["status"] == "failed"
    assert "hop ceiling 4 reached" in str(task.get("error"))


def test_p_hop_1_the_default_ceiling_is_1000(harness: Callable[..., Harness]) -> None:
    h = harness("echo", module="sidecar_handlers")
    _, failed = h.run(envelope("t-999", headers={"x-asya-flow": "text-pipeline", HOPS: 999}))
    assert failed == []
    (out,) = h.drain("analyze")
    assert out["headers"][HOPS] == 1000
    h.run(envelope("t-1000", headers={"x-asya-flow": "text-pipeline", HOPS: 1000}))
    (sump,) = h.drain("x-sump")
    assert sump["payload"]["details"]["message"] == "hop ceiling 1000 reached"
    assert h.drain("analyze") == []


def test_p_hop_1_a_normal_hop_counts_one(harness: Callable[..., Harness]) -> None:
    """An envelope the gateway created has no count: its first send carries 1."""
    h = harness("echo", module="sidecar_handlers")
    h.run(envelope("t-first"))
    (out,) = h.drain("analyze")
    assert out["headers"][HOPS] == 1
    assert h.drain("x-sump") == []


def test_p_hop_1_fan_out_children_inherit_the_count(harness: Callable[..., Harness]) -> None:
    h = harness("split", module="sidecar_handlers")
    h.run(envelope("t-fan", payload={"text": "a b c"}, headers={"x-asya-flow": "text-pipeline", HOPS: 7}))
    outs = h.drain("analyze")
    assert len(outs) == 3 and {out.get("parent_id") for out in outs} == {None, "t-fan"}
    assert [out["headers"][HOPS] for out in outs] == [8, 8, 8]


def test_p_hop_1_a_handler_cannot_reset_the_count(harness: Callable[..., Harness]) -> None:
    h = harness("reset_hops")
    h.run(envelope("t-reset", headers={"x-asya-flow": "text-pipeline", HOPS: 41}))
    (out,) = h.drain("analyze")
    assert out["headers"][HOPS] == 42
    assert "P-HDR-5" in out["payload"]["refused"]
