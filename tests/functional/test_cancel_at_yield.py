"""Cancel that reaches running work, against moto (docs/protocol.md P-CANCEL-1..5 (R3)): a canceled task's generator
handler stops at its next yield and cleans up; the envelope goes to x-sink as canceled, with no retry and no failed
status; a plain function runs to its end."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.functional.actors import NOW, Harness, envelope

pytestmark = pytest.mark.functional


class _Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _handlers() -> Any:
    return sys.modules["cancel_handlers"]


@pytest.fixture
def make(mesh: Any) -> Iterator[Callable[..., tuple[Harness, _Monotonic]]]:
    def build(handler: str) -> tuple[Harness, _Monotonic]:
        monotonic = _Monotonic()
        h = Harness(mesh, handler, module="cancel_handlers", clock=lambda: NOW, monotonic=monotonic)
        _handlers().EVENTS.clear()
        _handlers().AT_YIELD.clear()
        return h, monotonic

    yield build
    if "cancel_handlers" in sys.modules:
        _handlers().AT_YIELD.clear()


def _cancel_meanwhile(h: Harness, monotonic: _Monotonic, task_id: str) -> None:
    def cancel() -> None:
        assert h.store.cancel(task_id) == "canceled"
        monotonic.now += 5.0  # one read interval: the next check reads the task item

    _handlers().AT_YIELD.append(cancel)


def test_p_cancel_1_a_canceled_tasks_generator_stops_at_its_next_yield_and_cleans_up(
    make: Callable[..., tuple[Harness, _Monotonic]],
) -> None:
    h, monotonic = make("worker")
    h.store.create_task(task_id="t-cancel-run", actor="normalize", payload={"text": "x"})
    _cancel_meanwhile(h, monotonic, "t-cancel-run")
    _, failed = h.run(envelope("t-cancel-run"))
    assert failed == []
    assert _handlers().EVENTS == ["step 0", "cleaned up"]
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert (out["status"]["phase"], out["status"]["reason"]) == ("canceled", "CanceledAtYield")
    assert out["status"]["actor"] == "normalize"
    assert out["payload"] == {"text": "hello big world"}
    assert h.drain("x-sump") == []  # P-CANCEL-5: no failure, no retry
    assert h.drain("normalize") == []
    assert h.store.get_task("t-cancel-run")["status"] == "canceled"


def test_p_cancel_1_a_canceled_childs_generator_stops_too(make: Callable[..., tuple[Harness, _Monotonic]]) -> None:
    """A child reads its parent's task item (P-FAN-5)."""
    h, monotonic = make("worker")
    h.store.create_task(task_id="t-cancel-parent", actor="normalize", payload={})
    _cancel_meanwhile(h, monotonic, "t-cancel-parent")
    _, failed = h.run(envelope("child-c1", parent_id="t-cancel-parent"))
    assert failed == []
    assert _handlers().EVENTS == ["step 0", "cleaned up"]
    [out] = h.drain("x-sink")
    assert (out["id"], out["status"]["reason"]) == ("child-c1", "CanceledAtYield")


def test_p_cancel_3_no_read_before_the_interval_passed(make: Callable[..., tuple[Harness, _Monotonic]]) -> None:
    """Within one read interval the layer does not read the task item: the generator runs to its end."""
    h, _ = make("worker")
    h.store.create_task(task_id="t-cancel-late", actor="normalize", payload={"text": "x"})
    _handlers().AT_YIELD.append(lambda: h.store.cancel("t-cancel-late"))  # the clock stands still
    _, failed = h.run(envelope("t-cancel-late"))
    assert failed == []
    assert _handlers().EVENTS[-1] == "ran to its end"
    assert [o["payload"] for o in h.drain("analyze")] == [{"done": True}]  # its next pre-flight stops it


def test_p_cancel_4_a_plain_function_runs_to_its_end(make: Callable[..., tuple[Harness, _Monotonic]]) -> None:
    h, monotonic = make("plain")
    h.store.create_task(task_id="t-cancel-plain", actor="normalize", payload={"text": "x"})
    _cancel_meanwhile(h, monotonic, "t-cancel-plain")
    _, failed = h.run(envelope("t-cancel-plain"))
    assert failed == []
    assert _handlers().EVENTS == ["ran to its end"]
    assert [o["payload"] for o in h.drain("analyze")] == [{"done": True}]
