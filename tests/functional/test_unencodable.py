"""Unencodable handler output against moto (P-ABI-19 R3; issue 25 defects 2 and 6).

A value UTF-8 JSON cannot carry (an integer over Python's 4,300-digit limit, a lone surrogate in a value or header,
colliding keys ``1``/``"1"``, a generator object a plain function returns) raises ``SerializationError`` before
anything of it is sent, and takes the ordinary handler-error path: x-sink gets a ``failed`` envelope and writes the
task's final status, so no task is left ``running`` with nothing in flight; no frame is counted as sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.functional.actors import NOW, Harness, envelope, run_sink

pytestmark = pytest.mark.functional


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str) -> Harness:
        return Harness(mesh, handler, module="unencodable_handlers", clock=lambda: NOW)

    return make


def _clock() -> datetime:
    return NOW


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("huge_int", "frame 0 cannot be serialised: integer"),
        ("surrogate_yield", "frame 0 cannot be serialised: string with a lone surrogate"),
        ("surrogate_header", "SET .headers.note: string with a lone surrogate"),
        ("surrogate_fly", "FLY value cannot be serialised: string with a lone surrogate"),
        ("colliding_keys", "same JSON key '1'"),
        ("returns_generator", "value of type generator is not serialisable"),
    ],
)
def test_p_abi_19_r3_unencodable_output_fails_the_task(
    harness: Callable[..., Harness], handler: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    """P-ABI-19 (R3): an ordinary handler error, so the task ends ``failed`` with a final status naming
    SerializationError; nothing reaches the next actor or x-sump, and no frames_sent is logged."""
    h = harness(handler)
    task_id = f"t-{handler.replace('_', '-')}"
    h.store.create_task(task_id=task_id, actor="normalize", payload={"text": "x"})
    with caplog.at_level(logging.INFO):
        _, failed = h.run(envelope(task_id))
    assert failed == []
    assert h.drain("analyze") == [], "nothing of the value was sent"
    assert h.drain("x-sump") == []
    assert "frames_sent" not in caplog.text
    [out] = h.drain("x-sink")
    assert out["status"]["phase"] == "failed"
    assert out["status"]["error"]["type"] == "asya.exceptions.SerializationError"
    assert message in out["status"]["error"]["message"]
    assert run_sink(h.mesh, [out], clock=_clock) == {"batchItemFailures": []}
    task = h.store.get_task(task_id, enforce_deadline=False)
    assert task is not None
    assert task["status"] == "failed"
    assert message in task["error"]
    assert task["error_details"]["type"] == "asya.exceptions.SerializationError"


def test_p_res_10_frames_sent_counts_only_frames_that_left(
    harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    """P-ABI-19 (R3) with P-RES-10: the first frame left, the second is refused at its yield, so the partial failure
    notice says frames_sent 1 (the frame that left), never 2."""
    h = harness("second_yield_unencodable")
    h.store.create_task(task_id="t-second", actor="normalize", payload={"text": "x"})
    _, failed = h.run(envelope("t-second"))
    assert failed == []
    [sent] = h.drain("analyze")
    assert sent["payload"] == {"ok": 1}
    [notice] = h.drain("x-sump")
    assert notice["status"]["error"]["frames_sent"] == 1
    assert "frame 1 cannot be serialised" in notice["payload"]["error"]
