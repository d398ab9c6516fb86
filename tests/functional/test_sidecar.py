"""The actor Lambda entry point against moto (PROTOCOL sections 4-6, 8.5, 9, 10, 14).

Each outcome is observed twice: as messages on the right queues and as ``batchItemFailures``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya import routing, sidecar
from asya.envelope import parse_envelope
from asya.store import StatusUpdate
from asya.store import records as rec
from asya.timeutil import format_ts
from tests.functional.actors import (
    HANDLERS,
    NOW,
    Context,
    Harness,
    LogLines,
    TaskWrites,
    envelope,
    fail_one_record,
    run_sink,
)

pytestmark = pytest.mark.functional


@pytest.fixture
def clock() -> Iterator[Callable[[], datetime]]:
    yield lambda: NOW


@pytest.fixture
def harness(mesh: Any, clock: Callable[[], datetime]) -> Callable[..., Harness]:
    def make(handler: str, **kwargs: Any) -> Harness:
        return Harness(mesh, handler, clock=clock, **kwargs)

    return make


# -- routing outcomes -------------------------------------------------------------------------------------------------


def test_p_route_3_one_frame_goes_to_the_next_actor(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-1")
    response, failed = h.run(env)
    assert failed == []
    assert response == {"batchItemFailures": []}
    [out] = h.drain("analyze")
    assert out["id"] == "t-1"
    assert out["route"] == {"prev": ["normalize"], "curr": "analyze", "next": []}
    assert out["payload"] == {"text": "hello big world", "seen": True}
    assert out["status"]["phase"] == "pending"
    assert out["status"]["actor"] == "analyze"
    assert out["status"]["deadline_at"] == env["status"]["deadline_at"]
    assert out["status"]["created_at"] == env["status"]["created_at"]
    assert out["headers"]["x-asya-flow"] == "text-pipeline"
    assert out["headers"]["x-asya-first-attempt"] == format_ts(NOW)
    assert h.drain("x-sink") == []
    assert h.drain("x-sump") == []


def test_p_fan_2_fan_out_ids_parent_id_and_order(harness: Callable[..., Harness]) -> None:
    """Children leave first and frame 0, keeping the input id, last (P-ROUTE-9, R2); child ids are name-based UUIDs of
    the input id, the hop and the frame index (P-FAN-2, R2), so a re-run of the hop yields the same ones."""
    h = harness("split")
    env = envelope("t-fan", payload={"text": "a b c"})
    _, failed = h.run(env)
    assert failed == []
    outs = h.drain("analyze")
    assert [o["payload"] for o in outs] == [
        {"chunk": 1, "word": "b"},
        {"chunk": 2, "word": "c"},
        {"chunk": 0, "word": "a"},
    ]
    assert outs[-1]["id"] == "t-fan"
    assert "parent_id" not in outs[-1]
    entry = parse_envelope(env)
    for k, child in enumerate(outs[:-1], start=1):
        assert child["parent_id"] == "t-fan"
        assert uuid.UUID(child["id"]).version == 5
        assert child["id"] == routing.child_id(entry, k)
    assert len({o["id"] for o in outs}) == 3
    _, failed = h.run(env)  # the same hop again: the same children
    assert failed == []
    assert [o["id"] for o in h.drain("analyze")] == [o["id"] for o in outs]


def test_p_route_9_more_than_ten_frames_all_leave(harness: Callable[..., Harness]) -> None:
    h = harness("split")
    words = " ".join(f"w{i}" for i in range(23))
    _, failed = h.run(envelope("t-many", payload={"text": words}))
    assert failed == []
    outs = h.drain("analyze")
    assert sorted(o["payload"]["chunk"] for o in outs) == list(range(23))


def test_p_route_5_zero_frames_to_sink_with_the_input_as_received(harness: Callable[..., Harness]) -> None:
    h = harness("nothing")
    env = envelope("t-zero")
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sink")
    assert out["route"] == env["route"], "zero frames: route not shifted"
    assert out["payload"] == env["payload"], "the handler's in-place mutation must not leak"
    assert out["status"]["phase"] == "succeeded"
    assert out["status"]["reason"] == "Completed"
    assert out["status"]["actor"] == "normalize"
    assert h.drain("analyze") == []


def test_p_route_4_exhausted_route_goes_to_sink(harness: Callable[..., Harness]) -> None:
    """Also P-ENV-3: an exhausted route is still written with all three members, ``curr`` = ``""``."""
    h = harness("echo")
    _, failed = h.run(envelope("t-end", nxt=[]))
    assert failed == []
    [out] = h.drain("x-sink")
    assert out["route"] == {"prev": ["normalize"], "curr": "", "next": []}
    assert out["status"]["phase"] == "succeeded"
    assert out["status"]["reason"] == "Completed"
    assert out["payload"]["seen"] is True


def test_p_res_11_handler_error_goes_to_sink_failed_with_error_payload(harness: Callable[..., Harness]) -> None:
    h = harness("boom")
    env = envelope("t-boom")
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sink")
    assert out["route"] == env["route"]
    assert out["status"]["phase"] == "failed"
    assert out["status"]["reason"] == "RuntimeError"
    assert out["status"]["error"]["type"] == "ValueError"
    assert out["status"]["error"]["mro"] == ["Exception"]
    assert "Traceback" in out["status"]["error"]["traceback"]
    assert out["payload"]["error"] == "ValueError: cannot handle {'text': 'hello big world'}"
    assert out["payload"]["details"]["message"] == "cannot handle {'text': 'hello big world'}"
    assert out["payload"]["original_payload"] == env["payload"]
    assert out["headers"]["x-asya-flow"] == "text-pipeline"
    assert h.drain("x-sump") == []


# -- infrastructure errors --------------------------------------------------------------------------------------------


def test_p_env_9_non_json_body_goes_to_sump_with_raw_body(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    _, failed = h.run("{this is not json")
    assert failed == []
    [out] = h.drain("x-sump")
    assert out["status"]["reason"] == "ParseError"
    assert out["status"]["phase"] == "failed"
    assert out["status"]["actor"] == "normalize"
    assert out["route"] == {"prev": [], "curr": "x-sump", "next": []}
    assert out["payload"]["details"]["raw_body"] == "{this is not json"
    assert "original_payload" not in out["payload"]
    assert uuid.UUID(out["id"]).version == 4


def test_p_ack_3_a_body_nested_too_deeply_to_parse_goes_to_sump_and_spares_the_batch(
    harness: Callable[..., Harness],
) -> None:
    h = harness("echo")
    deep = '{"id": "t-deep", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _, failed = h.run(deep, envelope("t-fine"))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "ParseError"
    assert "nested too deeply" in sump["payload"]["details"]["message"]
    [fine] = h.drain("analyze")
    assert fine["id"] == "t-fine"


def test_p_gen_3_a_timestamp_out_of_range_is_ignored_not_a_crash(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-year-one")
    env["status"]["created_at"] = "0001-01-01T00:00:00+01:00"  # before year 1 once in UTC
    _, failed = h.run(env, envelope("t-fine"))
    assert failed == []
    assert sorted(out["id"] for out in h.drain("analyze")) == ["t-fine", "t-year-one"]
    assert h.drain("x-sump") == []


def test_p_ack_3_any_parser_failure_becomes_a_parse_error_not_a_failed_batch(
    harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness("echo")
    real_parse = sidecar.parse_envelope

    def parse(body: str) -> Any:
        if "t-odd" in body:
            raise KeyError("a parser bug")
        return real_parse(body)

    monkeypatch.setattr(sidecar, "parse_envelope", parse)
    _, failed = h.run(envelope("t-odd"), envelope("t-fine"))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["id"] == "t-odd"
    assert sump["status"]["reason"] == "ParseError"
    assert "KeyError" in sump["payload"]["details"]["message"]
    assert [out["id"] for out in h.drain("analyze")] == ["t-fine"]


def test_p_env_10_missing_id_goes_to_sump(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope()
    del env["id"]
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sump")
    assert out["status"]["reason"] == "ParseError"
    assert "id" in out["payload"]["details"]["message"]
    assert json.loads(out["payload"]["details"]["raw_body"]) == env


def test_p_err_4_parse_error_keeps_a_valid_id(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-noroute")
    del env["route"]
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sump")
    assert out["id"] == "t-noroute"
    assert out["status"]["reason"] == "ParseError"
    assert out["route"] == {"prev": [], "curr": "x-sump", "next": []}  # the one member that did not parse


def test_p_err_4_parse_error_keeps_every_member_that_parsed(harness: Callable[..., Harness]) -> None:
    """P-ERR-4, P-HDR-1: route, headers, parent_id, attempt, created_at and deadline_at of a body refused for one
    member (here: no payload) travel to x-sump; the payload does not (the body did not parse)."""
    h = harness("echo")
    env = envelope("t-nopayload", parent_id="t-origin", headers={"x-asya-flow": "text-pipeline", "k": "v"})
    env["status"]["attempt"] = 2
    env["status"]["max_attempts"] = 3
    del env["payload"]
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sump")
    assert out["id"] == "t-nopayload"
    assert out["parent_id"] == "t-origin"
    assert out["route"] == env["route"]
    assert out["headers"] == {**env["headers"], "x-asya-hops": 1}  # the x-sump send counts (P-HOP-1 (R3))
    assert out["status"]["attempt"] == 2 and out["status"]["max_attempts"] == 3
    assert out["status"]["created_at"] == env["status"]["created_at"]
    assert out["status"]["deadline_at"] == env["status"]["deadline_at"]
    assert "original_payload" not in out["payload"]
    assert "payload" in out["payload"]["details"]["message"]


def test_p_route_1_route_mismatch_goes_to_sump(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-mis", curr="summarize")
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("x-sump")
    assert out["id"] == "t-mis"
    assert out["status"]["reason"] == "RouteMismatch"
    assert out["payload"]["details"]["message"] == "route mismatch: envelope for 'summarize' delivered to 'normalize'"
    assert out["payload"]["original_payload"] == env["payload"]
    assert out["route"] == env["route"]
    assert out["status"]["deadline_at"] == env["status"]["deadline_at"]
    assert h.drain("analyze") == []


def test_p_route_1_override_target_accepts(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-ovr", curr="summarize", headers={"x-asya-route-override": {"summarize": "normalize"}})
    _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("analyze")
    assert out["route"]["prev"] == ["summarize"]


def test_p_route_7_frame_sent_to_the_override_target(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    env = envelope("t-ovr2", nxt=["summarize"], headers={"x-asya-route-override": {"summarize": "analyze"}})
    _, failed = h.run(env)
    assert failed == []
    assert h.drain("summarize") == []
    [out] = h.drain("analyze")
    assert out["route"]["curr"] == "summarize"
    assert out["headers"]["x-asya-route-resolved"] == {"summarize": {"target": "analyze", "by": "normalize"}}


def test_p_abi_2_handler_load_error_goes_to_sump(harness: Callable[..., Harness]) -> None:
    h = harness("NeedsArgs.process")
    _, failed = h.run(envelope("t-load1"), envelope("t-load2"))
    assert failed == []
    outs = h.drain("x-sump")
    assert sorted(o["id"] for o in outs) == ["t-load1", "t-load2"]
    for out in outs:
        assert out["status"]["reason"] == "HandlerLoadError"
        assert "NeedsArgs" in out["payload"]["details"]["message"]
        assert out["payload"]["original_payload"] == {"text": "hello big world"}


def test_p_route_8_unknown_actor_frame_goes_to_sump_others_unaffected(harness: Callable[..., Harness]) -> None:
    h = harness("to_ghost")
    _, failed = h.run(envelope("t-ghost"))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "UnknownActor"
    assert "ghost" in sump["payload"]["details"]["message"]
    assert sump["payload"]["original_payload"] == {"to": "ghost"}
    [ok] = h.drain("analyze")
    assert ok["payload"] == {"to": "analyze"}


def test_p_route_8_unknown_next_actor_in_the_input_route(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    _, failed = h.run(envelope("t-nope", nxt=["nowhere"]))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "UnknownActor"
    assert sump["id"] == "t-nope"


@pytest.mark.parametrize("legacy_end", ["happy-end", "error-end"])
def test_p_env_16_legacy_end_queue_names_are_unknown_actors(harness: Callable[..., Harness], legacy_end: str) -> None:
    """P-ENV-16: upstream's end queues mean nothing here; routed to, the frame goes to x-sump as ``UnknownActor``
    (P-ROUTE-8) and never reaches x-sink as a success or failure."""
    h = harness("echo")
    h.store.create_task(task_id="t-legacy-end", actor="normalize", payload={})
    _, failed = h.run(envelope("t-legacy-end", nxt=[legacy_end]))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["id"] == "t-legacy-end"
    assert sump["status"]["phase"] == "failed"
    assert sump["status"]["reason"] == "UnknownActor"
    assert legacy_end in sump["payload"]["details"]["message"]
    assert sump["payload"]["original_payload"] == {"text": "hello big world", "seen": True}, "the frame"
    assert h.drain("x-sink") == []
    task = h.store.get_task("t-legacy-end")
    assert task is not None
    assert task["status"] == "failed"
    assert legacy_end in task["error"]


def test_p_abi_19_r3_unserialisable_frame_is_a_handler_error(harness: Callable[..., Harness]) -> None:
    """P-ABI-19 (R3): an ordinary handler error (it went to x-sump as an infrastructure error before): x-sink fails
    the task with the SerializationError."""
    h = harness("not_json")
    _, failed = h.run(envelope("t-nan"))
    assert failed == []
    assert h.drain("x-sump") == []
    [out] = h.drain("x-sink")
    assert (out["status"]["phase"], out["status"]["reason"]) == ("failed", "RuntimeError")
    assert out["status"]["error"]["type"] == "asya.exceptions.SerializationError"
    assert out["payload"]["original_payload"] == {"text": "hello big world"}


def test_p_err_5_failing_sump_send_fails_the_record_alone(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.sqs.delete_queue(QueueUrl=h.url("x-sump"))
    _, failed = h.run(envelope("t-ok1"), envelope("t-bad", curr="summarize"), envelope("t-ok2"))
    assert failed == ["1"]
    assert sorted(o["id"] for o in h.drain("analyze")) == ["t-ok1", "t-ok2"]


def test_p_ack_2_failing_sink_send_fails_the_record(harness: Callable[..., Harness]) -> None:
    h = harness("boom")
    h.sqs.delete_queue(QueueUrl=h.url("x-sink"))
    _, failed = h.run(envelope("t-nosink"))
    assert failed == ["0"]


# -- pre-flight, SLA, stealth, progress ------------------------------------------------------------------------------


def test_p_stat_10_canceled_task_goes_to_sink_canceled(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-cancel", actor="normalize", payload={"text": "x"})
    assert h.store.cancel("t-cancel") == "canceled"
    _, failed = h.run(envelope("t-cancel"))
    assert failed == []
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert out["status"]["phase"] == "canceled"
    assert out["status"]["reason"] == "PreFlightCanceled"
    assert out["status"]["actor"] == "normalize"


def test_p_stat_10_paused_task_goes_to_sink_paused(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-paused", actor="normalize", payload={"text": "x"})
    paused = StatusUpdate(status="paused", pause_metadata={"prompt": "approve?"}, remaining_seconds=60)
    assert h.store.apply("t-paused", paused).accepted
    _, failed = h.run(envelope("t-paused"))
    assert failed == []
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert (out["status"]["phase"], out["status"]["reason"]) == ("paused", "PreFlightPaused")
    assert out["status"]["actor"] == "normalize"
    assert h.store.get_task("t-paused")["status"] == "paused"  # not reported (P-STAT-10)


def test_p_fan_5_child_preflight_reads_the_parent(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-parent", actor="normalize", payload={})
    h.store.cancel("t-parent")
    _, failed = h.run(envelope("child-1", parent_id="t-parent"), envelope("t-other"))
    assert failed == []
    [sink] = h.drain("x-sink")
    assert sink["id"] == "child-1"
    assert sink["status"]["reason"] == "PreFlightCanceled"
    assert [o["id"] for o in h.drain("analyze")] == ["t-other"]


def test_p_time_3_expired_deadline_goes_to_sink_timeout_and_fails_the_task(
    harness: Callable[..., Harness],
) -> None:
    """R2: the layer sends the envelope to x-sink and writes no status; x-sink writes the final ``failed``."""
    h = harness("echo")
    h.store.create_task(task_id="t-late", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-late") as writes:
        _, failed = h.run(envelope("t-late", deadline=NOW + timedelta(milliseconds=500)))
    assert failed == []
    assert writes.requests == [], "no claim, no status write by the layer"
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert out["status"]["phase"] == "failed"
    assert out["status"]["reason"] == "Timeout"
    assert out["status"]["error"] == {"message": "SLA deadline expired", "type": "DeadlineExceeded"}
    assert h.store.get_task("t-late", enforce_deadline=False)["status"] == "pending"  # type: ignore[index]
    assert run_sink(h.mesh, [out], clock=lambda: NOW) == {"batchItemFailures": []}
    task = h.store.get_task("t-late", enforce_deadline=False)
    assert task is not None
    assert task["status"] == "failed"
    assert task["error"] == "SLA deadline expired"
    assert (task["failed_actor"], task["last_event_id"]) == ("normalize", 2)


def test_p_stat_12_stealth_mode_writes_nothing(harness: Callable[..., Harness]) -> None:
    h = harness("stream_fly")
    h.store.create_task(task_id="t-stealth", actor="normalize", payload={})
    headers = {"x-asya-mesh-status": "OFF", "x-asya-progress": "detailed"}
    with TaskWrites(h.mesh.aws.dynamodb, "t-stealth") as writes:
        _, failed = h.run(envelope("t-stealth", headers=headers))
    assert failed == []
    assert writes.requests == []  # no claim, no progress, no FLY (the handler yields some)
    task = h.store.get_task("t-stealth")
    assert task is not None
    assert (task["status"], task["last_event_id"]) == ("pending", 1)
    assert h.store.snapshot("t-stealth", 0).fly == []  # type: ignore[union-attr]
    [out] = h.drain("analyze")
    assert out["headers"]["x-asya-mesh-status"] == "OFF"


def test_p_stat_12_stealth_mode_skips_preflight(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-stealth2", actor="normalize", payload={})
    h.store.cancel("t-stealth2")
    _, failed = h.run(envelope("t-stealth2", headers={"x-asya-mesh-status": "off"}))
    assert failed == []
    assert [o["id"] for o in h.drain("analyze")] == ["t-stealth2"]


HOOK_COPY = {"x-asya-sink-hook": {"hook": "normalize", "phase": "succeeded"}}


def test_p_stat_13_hook_copy_at_a_user_actor_writes_no_status_events_or_fly(harness: Callable[..., Harness]) -> None:
    """A hook copy (P-SINK-6) is untracked like a stealth envelope: no progress event, no FLY value, no status change,
    whatever the progress mode; the handler still runs and its frame leaves with the hook header."""
    h = harness("stream_fly")
    h.store.create_task(task_id="t-hook", actor="normalize", payload={})
    headers = {**HOOK_COPY, "x-asya-progress": "detailed"}
    with TaskWrites(h.mesh.aws.dynamodb, "t-hook") as writes:
        _, failed = h.run(envelope("t-hook", nxt=[], headers=headers))
    assert failed == []
    assert writes.requests == [], "no claim, no status change and no FLY item"
    task = h.store.get_task("t-hook")
    assert task is not None
    assert task["status"] == "pending"
    assert task["last_event_id"] == 1
    [out] = h.drain("x-sink")
    assert out["payload"] == {"text": "hello big world", "done": True}
    assert out["status"]["phase"] == "succeeded"
    assert out["headers"]["x-asya-sink-hook"] == HOOK_COPY["x-asya-sink-hook"], "x-sink acks it (P-SINK-2)"


def test_p_stat_13_hook_copy_skips_preflight_even_for_a_canceled_task(harness: Callable[..., Harness]) -> None:
    """Pre-flight (P-STAT-10) is skipped for hook copies: the canceled task's hook still runs its handler, and the
    copy is not turned into a ``PreFlightCanceled`` envelope."""
    h = harness("echo")
    h.store.create_task(task_id="t-hook-cancel", actor="normalize", payload={})
    assert h.store.cancel("t-hook-cancel") == "canceled"
    with TaskWrites(h.mesh.aws.dynamodb, "t-hook-cancel") as writes:
        _, failed = h.run(envelope("t-hook-cancel", nxt=[], headers=dict(HOOK_COPY)))
    assert failed == []
    [out] = h.drain("x-sink")
    assert out["status"]["phase"] == "succeeded"
    assert out["status"]["reason"] == "Completed"
    assert out["payload"] == {"text": "hello big world", "seen": True}, "the handler ran"
    assert writes.requests == []
    assert h.store.get_task("t-hook-cancel")["status"] == "canceled"  # type: ignore[index]


def test_p_hdr_2_mesh_status_header_name_is_case_sensitive(harness: Callable[..., Harness]) -> None:
    """``X-Asya-Mesh-Status: off`` is not ``x-asya-mesh-status`` (P-HDR-2): the envelope is tracked, so its progress
    is written (unlike P-STAT-12's stealth mode, whose *value* alone is case-insensitive); the header travels as is."""
    h = harness("echo")
    h.store.create_task(task_id="t-case", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-case") as writes:
        _, failed = h.run(envelope("t-case", headers={"X-Asya-Mesh-Status": "off"}))
    assert failed == []
    assert writes.steps() == [("running", "processing")]
    task = h.store.get_task("t-case")
    assert task is not None
    assert task["status"] == "running"
    [out] = h.drain("analyze")
    assert out["headers"]["X-Asya-Mesh-Status"] == "off"
    assert "x-asya-mesh-status" not in out["headers"]


def test_p_hdr_2_sink_hook_header_name_is_case_sensitive(harness: Callable[..., Harness]) -> None:
    """``X-Asya-Sink-Hook`` does not make a hook copy (P-HDR-2): pre-flight runs and a canceled task's envelope goes
    to x-sink canceled (P-STAT-10)."""
    h = harness("echo")
    h.store.create_task(task_id="t-case-hook", actor="normalize", payload={})
    h.store.cancel("t-case-hook")
    _, failed = h.run(envelope("t-case-hook", headers={"X-Asya-Sink-Hook": HOOK_COPY["x-asya-sink-hook"]}))
    assert failed == []
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert (out["status"]["phase"], out["status"]["reason"]) == ("canceled", "PreFlightCanceled")


def test_p_hdr_2_route_override_header_name_is_case_sensitive(harness: Callable[..., Harness]) -> None:
    """``X-Asya-Route-Override`` is no override (P-HDR-2): the route check (P-ROUTE-1) rejects the envelope that
    ``test_p_route_1_override_target_accepts`` accepts with the lowercase name."""
    h = harness("echo")
    headers = {"X-Asya-Route-Override": {"summarize": "normalize"}}
    _, failed = h.run(envelope("t-case-ovr", curr="summarize", headers=headers))
    assert failed == []
    assert h.drain("analyze") == []
    [out] = h.drain("x-sump")
    assert out["status"]["reason"] == "RouteMismatch"


def test_p_stat_19_hops_mode_writes_one_processing_event(harness: Callable[..., Harness]) -> None:
    """Progress ``hops`` (the default): the hop's only write is its claim (P-ACK-8), which is the running status with
    step ``processing``, the fence and the lease; the route lists are not stored."""
    h = harness("echo")
    h.store.create_task(task_id="t-hops", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-hops") as writes:
        h.run(envelope("t-hops"))
    assert writes.operations() == ["UpdateItem"]
    [state] = writes.states
    assert (state["status"], state["step"], state["last_seq"]) == ("running", "processing", 2)
    assert (state["fence_h"], state["fence_a"]) == (1, 1)  # h = len(prev) + 1, attempt 1
    # the lease runs to the invocation's hard deadline (300 s left in the test context) + 10 s
    assert state["lease_until"] == rec.epoch_ms(NOW) + 310_000
    assert "prev" not in state.get("data", {}) and "next" not in state.get("data", {})
    task = h.store.get_task("t-hops")
    assert task is not None
    assert task["status"] == "running"
    assert task["current_actor"] == "normalize"
    assert task["progress_percent"] == 25.0  # k=1, N=2: (0 + 0.5) / 2
    assert task["last_event_id"] == 2


def test_p_stat_19_detailed_mode_writes_received_processing_completed(harness: Callable[..., Harness]) -> None:
    """Progress ``detailed`` adds ``received`` before the claim and ``completed`` after the frames, and stores the
    route lists; each write is one change of the task item."""
    h = harness("echo")
    h.store.create_task(task_id="t-det", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-det") as writes:
        h.run(envelope("t-det", headers={"x-asya-progress": "detailed"}))
    assert writes.steps() == [("running", "received"), ("running", "processing"), ("running", "completed")]
    assert [state["last_seq"] for state in writes.states] == [2, 3, 4]
    assert [state["progress_percent"] for state in writes.states] == [5.0, 25.0, 50.0]
    received, claim, _ = writes.states
    assert "fence_h" not in received and (claim["fence_h"], claim["fence_a"]) == (1, 1)
    assert (claim["data"]["prev"], claim["data"]["curr"], claim["data"]["next"]) == ([], "normalize", ["analyze"])
    task = h.store.get_task("t-det")
    assert task is not None
    assert (task["step"], task["progress_percent"], task["last_event_id"]) == ("completed", 50.0, 4)


def test_p_stat_19_final_mode_writes_no_running_events(harness: Callable[..., Harness]) -> None:
    """Progress ``final``: the claim stores fence and lease only; the view stays ``pending`` until the final status."""
    h = harness("echo")
    h.store.create_task(task_id="t-fin", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-fin") as writes:
        h.run(envelope("t-fin", headers={"x-asya-progress": "final"}))
    assert writes.operations() == ["UpdateItem"]
    [(_, request)] = writes.requests
    assert request["Key"] == rec.key("t-fin", rec.TASK_SK)
    assert "#status" not in request["UpdateExpression"] and "last_seq" not in request["UpdateExpression"]
    task = h.store.get_task("t-fin")
    assert task is not None
    assert (task["status"], task["step"], task["last_event_id"]) == ("pending", None, 1)
    item = h.mesh.aws.dynamodb.get_item(TableName=h.mesh.resources.table, Key=rec.key("t-fin", rec.TASK_SK))["Item"]
    assert (item["fence_h"]["N"], item["fence_a"]["N"]) == ("1", "1") and int(item["lease_until"]["N"]) > 0


def test_p_fan_3_children_write_no_status(harness: Callable[..., Harness]) -> None:
    """A child claims its hop on its own child item under the parent task (P-ACK-8, P-FAN-3), never on the task
    item; the parent's view lists it (``children``)."""
    h = harness("echo")
    h.store.create_task(task_id="t-root", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-root") as writes:
        h.run(envelope("child-x", parent_id="t-root"))
    assert writes.states == []  # the task item was not written
    [(operation, request)] = writes.requests
    assert (operation, request["Key"]) == ("UpdateItem", rec.key("t-root", rec.child_sk("child-x")))
    task = h.store.get_task("t-root")
    assert task is not None
    assert (task["status"], task["last_event_id"]) == ("pending", 1)
    assert task["children"] == [
        {
            "id": "child-x",
            "status": "running",
            "current_actor": "normalize",
            "actor": "normalize",
            "hop": 1,
            "attempt": 1,
            "error": None,
        }
    ]


def test_p_stat_15_fly_values_go_to_the_task_log_before_completed(harness: Callable[..., Harness]) -> None:
    h = harness("stream_fly")
    h.store.create_task(task_id="t-fly", actor="normalize", payload={})
    with TaskWrites(h.mesh.aws.dynamodb, "t-fly") as writes:
        h.run(envelope("t-fly", headers={"x-asya-progress": "detailed"}))
    # numbers: 2 received, 3 the claim (processing), 4 and 5 the FLY values, 6 completed
    assert [(state["step"], state["last_seq"]) for state in writes.states] == [
        ("received", 2),
        ("processing", 3),
        ("completed", 6),
    ]
    snap = h.store.snapshot("t-fly", 1)
    assert snap is not None
    assert [(e["seq"], e["data"]["payload"]) for e in snap.fly] == [(4, {"partial": 1}), (5, {"partial": 2})]
    assert all(e["data"]["actor"] == "normalize" and e["data"]["envelope_id"] == "t-fly" for e in snap.fly)


def test_p_stat_15_child_fly_goes_to_the_parent_task(harness: Callable[..., Harness]) -> None:
    h = harness("stream_fly")
    h.store.create_task(task_id="t-p", actor="normalize", payload={})
    h.run(envelope("child-fly", parent_id="t-p"))
    snap = h.store.snapshot("t-p", 1)
    assert snap is not None
    fly = [e["data"] for e in snap.fly]
    assert [v["payload"] for v in fly] == [{"partial": 1}, {"partial": 2}]
    assert {v["envelope_id"] for v in fly} == {"child-fly"}
    assert snap.status == "pending"  # the child's values numbered on the parent; no status change of the parent


def test_p_err_6_infrastructure_error_fails_a_tracked_task(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-infra", actor="normalize", payload={})
    h.run(envelope("t-infra", curr="summarize"))
    task = h.store.get_task("t-infra")
    assert task is not None
    assert task["status"] == "failed"
    assert "route mismatch" in task["error"]


# -- batch behaviour --------------------------------------------------------------------------------------------------


def test_p_time_6_records_without_time_left_fail_unstarted_and_come_back(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    _, failed = h.run(envelope("t-a"), envelope("t-b"), envelope("t-c"), context=Context(remaining_ms=20_000))
    assert failed == ["1", "2"], "first record always starts; budget 30 s > 20 s - 5 s for the rest"
    assert [o["id"] for o in h.drain("analyze")] == ["t-a"]
    again = h.sqs.receive_message(QueueUrl=h.url("normalize"), MaxNumberOfMessages=10)
    assert sorted(json.loads(m["Body"])["id"] for m in again.get("Messages", [])) == ["t-b", "t-c"]


def test_p_time_6_short_deadline_budget_lets_a_record_start(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    soon = NOW + timedelta(seconds=8)
    _, failed = h.run(envelope("t-a"), envelope("t-b", deadline=soon), context=Context(remaining_ms=14_000))
    assert failed == [], "t-b's budget is its deadline, 8 s, within 14 s - 5 s: it starts"
    outs = {o["id"]: o for o in h.drain("analyze")}
    assert sorted(outs) == ["t-a", "t-b"]
    frame = outs["t-b"]
    assert frame["route"] == {"prev": ["normalize"], "curr": "analyze", "next": []}
    assert frame["payload"] == {"text": "hello big world", "seen": True}, "the handler ran"
    assert frame["status"]["phase"] == "pending"
    assert frame["status"]["deadline_at"] == format_ts(soon)
    assert h.drain("x-sink") == []
    assert h.sqs.receive_message(QueueUrl=h.url("normalize")).get("Messages", []) == [], "nothing came back"


def test_p_ack_1_lambda_event_fixture_shape(harness: Callable[..., Harness]) -> None:
    """The canonical SQS event (tests/events/sqs_event.json) is accepted as is."""
    h = harness("echo")
    event = json.loads((Path(__file__).resolve().parent.parent / "events" / "sqs_event.json").read_text())
    response = h.runtime.handle(event, Context())
    assert response == {"batchItemFailures": []}
    [out] = h.drain("analyze")
    assert out["route"]["prev"] == ["normalize"]


def test_p_route_8_unknown_destination_of_frame_zero_fails_a_tracked_task(harness: Callable[..., Harness]) -> None:
    h = harness("echo")
    h.store.create_task(task_id="t-lost", actor="normalize", payload={})
    _, failed = h.run(envelope("t-lost", nxt=["nowhere"]))
    assert failed == []
    task = h.store.get_task("t-lost")
    assert task is not None
    assert task["status"] == "failed"
    assert "nowhere" in task["error"]


def test_p_fan_6_unknown_destination_of_a_child_does_not_fail_the_task(harness: Callable[..., Harness]) -> None:
    h = harness("child_to_ghost")
    h.store.create_task(task_id="t-kid", actor="normalize", payload={})
    _, failed = h.run(envelope("t-kid"))
    assert failed == []
    [sump] = h.drain("x-sump")
    assert sump["payload"]["original_payload"] == {"to": "ghost"}
    assert [o["id"] for o in h.drain("analyze")] == ["t-kid"]
    task = h.store.get_task("t-kid")
    assert task is not None
    assert task["status"] == "running"


TRACEPARENT = "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-1a2b3c4d5e6f7081-01"


@pytest.mark.parametrize(("tracing", "same_span"), [("", True), ("true", False)])
def test_p_trace_1_traceparent_on_every_send(harness: Callable[..., Harness], tracing: str, same_span: bool) -> None:
    h = harness("split", env={"ASYA_TRACING": tracing})
    h.run(envelope("t-tr", headers={"traceparent": TRACEPARENT, "tracestate": "k=v"}, payload={"text": "a b"}))
    outs = h.drain("analyze")
    assert len(outs) == 2
    parents = {o["headers"]["traceparent"] for o in outs}
    assert len(parents) == 1, "one span per hop"
    [parent] = parents
    assert parent.split("-")[1] == "8f1c2d3e4b5a69788796a5b4c3d2e1f0"
    assert (parent == TRACEPARENT) is same_span
    assert all(o["headers"]["tracestate"] == "k=v" for o in outs)


def test_lambda_handler_builds_the_runtime_once_from_the_environment(
    mesh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sidecar, "_RUNTIME", None)
    for key, value in {
        "ASYA_NAMESPACE": mesh.resources.namespace,
        "ASYA_ACTOR": "normalize",
        "ASYA_HANDLER": "sidecar_handlers.echo",
        "ASYA_CODE_DIR": str(HANDLERS),
    }.items():
        monkeypatch.setenv(key, value)
    h = Harness(mesh, "echo", clock=lambda: datetime.now(UTC))
    first = sidecar.lambda_handler(h.event(envelope("t-l1", deadline=None)), Context())
    runtime = sidecar._RUNTIME
    second = sidecar.lambda_handler(h.event(envelope("t-l2", deadline=None)), Context())
    assert first == second == {"batchItemFailures": []}
    assert runtime is not None
    assert sidecar._RUNTIME is runtime
    assert sorted(o["id"] for o in h.drain("analyze")) == ["t-l1", "t-l2"]


def test_p_ack_4_failed_records_come_back_with_backoff(harness: Callable[..., Harness]) -> None:
    h = harness("boom")
    h.sqs.delete_queue(QueueUrl=h.url("x-sink"))
    seen: list[dict[str, Any]] = []
    h.sqs.meta.events.register(
        "before-parameter-build.sqs.ChangeMessageVisibilityBatch", lambda params, **_: seen.extend(params["Entries"])
    )
    event = h.event(envelope("t-1st"), envelope("t-3rd"))
    event["Records"][1]["attributes"]["ApproximateReceiveCount"] = "3"
    response = h.runtime.handle(event, Context())
    assert len(response["batchItemFailures"]) == 2
    assert [e["VisibilityTimeout"] for e in seen] == [5, 20]
    assert h.sqs.receive_message(QueueUrl=h.url("normalize")).get("Messages", []) == []


def test_p_ack_3_a_failed_record_logs_why_in_one_line(harness: Callable[..., Harness]) -> None:
    """P-ACK-3: a record that fails (here its required x-sink send, P-ACK-2) is delivered again; the operator learns
    why from one WARNING line naming the record and the error, without a traceback (Powertools logs it at DEBUG)."""
    h = harness("boom")
    h.sqs.delete_queue(QueueUrl=h.url("x-sink"))
    failed = fail_one_record(h, envelope("t-why"))
    assert failed.__dict__["error_type"] == "asya.transport.UnknownActorError"
    assert "x-sink" in failed.__dict__["error"]


def test_p_stat_7_failing_progress_and_fly_writes_never_fail_the_record(
    harness: Callable[..., Harness], mesh: Any
) -> None:
    """P-STAT-7: every best-effort task-record update of the hop (``received``, ``completed`` and the FLY append) is
    refused by DynamoDB; each failure is logged, and the record still routes its frame and is acked. The claim is
    durable (P-ACK-8, R2) and lands: it is the only change of the task item."""
    h = harness("stream_fly")
    h.store.create_task(task_id="t-best-effort", actor="normalize", payload={})
    refused: list[str] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if "#fence_h" in params.get("ExpressionAttributeNames", {}):
            return  # the claim
        refused.append(params["UpdateExpression"])
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "table unavailable"}}, "UpdateItem")

    mesh.aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", refuse)
    env = envelope("t-best-effort", headers={"x-asya-progress": "detailed"})
    with LogLines(h) as logs:
        _, failed = h.run(env)
    assert failed == []
    [out] = h.drain("analyze")
    assert out["id"] == "t-best-effort"
    assert out["payload"] == {"text": "hello big world", "done": True}
    assert h.drain("x-sink") == [] and h.drain("x-sump") == []
    assert [r.__dict__["step"] for r in logs.named("progress write failed")] == ["received", "completed"]
    fly_failures = logs.named("FLY append failed")
    assert fly_failures and sum(r.__dict__["count"] for r in fly_failures) == 2
    assert len(refused) == 2 + len(fly_failures), "every refused write was attempted"
    assert logs.named("record failed: SQS delivers it again") == []
    task = h.store.get_task("t-best-effort")
    assert task is not None
    assert (task["status"], task["step"], task["last_event_id"]) == ("running", "processing", 2)
    assert h.store.snapshot("t-best-effort", 0).fly == []  # type: ignore[union-attr]


PHASES = {"pending", "processing", "retrying", "succeeded", "failed", "paused", "canceled"}


def test_p_trace_4_a_record_s_log_lines_carry_its_id_actor_attempt_and_phase(harness: Callable[..., Harness]) -> None:
    """P-TRACE-4: JSON log lines, ``correlation_id`` = the envelope id of the record being processed, plus ``actor``,
    ``attempt`` and ``phase``. Two records of one batch, each logging once (a handler error without a policy, an
    expired SLA), must not share each other's keys."""
    h = harness("boom")
    retried = envelope("t-log-retry")
    retried["status"].update(phase="retrying", attempt=2, max_attempts=3)
    late = envelope("t-log-late", deadline=NOW + timedelta(milliseconds=500))
    with LogLines(h) as logs:
        _, failed = h.run(retried, late)
    assert failed == []
    by_message = {line["message"]: line for line in logs.lines}
    error_line = by_message["handler error, no retry policy: sent to x-sink"]
    sla_line = by_message["SLA deadline expired: sent to x-sink"]
    assert error_line["correlation_id"] == "t-log-retry"
    assert sla_line["correlation_id"] == "t-log-late"
    assert (error_line["actor"], error_line["attempt"]) == ("normalize", 2)
    assert (sla_line["actor"], sla_line["attempt"]) == ("normalize", 1)
    assert {error_line["phase"], sla_line["phase"]} <= PHASES
    assert error_line["level"] == sla_line["level"] == "WARNING"


def test_p_trace_4_a_batch_level_line_after_a_record_carries_no_record_keys(harness: Callable[..., Harness]) -> None:
    """P-TRACE-4: a record's ``correlation_id``, ``attempt`` and ``phase`` end with the record. A line logged by the
    actor's logger after the batch (a batch-level line: history flush, backoff) carries ``actor`` and none of them."""
    h = harness("echo")
    with LogLines(h) as logs:
        _, failed = h.run(envelope("t-log-scoped"))
        logging.getLogger(h.runtime.config.queue_name).warning("batch-level line")
    assert failed == []
    [line] = [line for line in logs.lines if line["message"] == "batch-level line"]
    assert line["actor"] == "normalize"
    assert not {"correlation_id", "attempt", "phase"} & set(line), line
