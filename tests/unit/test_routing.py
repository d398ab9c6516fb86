"""Routing decisions (PROTOCOL sections 4, 5, 6, 8.4, 8.5, 9, 10.4, 15): pure functions, spec examples as fixtures."""

from __future__ import annotations

import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from asya import routing
from asya.envelope import Envelope, Reason, Route, Status, parse_envelope

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"
TRACEPARENT = "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-1a2b3c4d5e6f7081-01"

#: PROTOCOL 1.5: the envelope received by `analyze`.
HOP_INPUT: dict[str, Any] = {
    "id": TASK,
    "route": {"prev": ["normalize"], "curr": "analyze", "next": ["summarize"]},
    "headers": {
        "traceparent": TRACEPARENT,
        "x-asya-flow": "text-pipeline",
        "x-asya-first-attempt": "2026-03-01T10:00:01Z",
    },
    "status": {
        "phase": "pending",
        "actor": "analyze",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:02Z",
        "deadline_at": "2026-03-01T10:05:00Z",
    },
    "payload": {"text": "Hello World", "normalized": "hello world"},
}

#: No trace headers on the input: sends carry none.
NO_TRACE = routing.Trace()


def _parse(raw: dict[str, Any]) -> Envelope:
    """Parse from the wire form so no test shares (and mutates) the module-level fixtures."""
    return parse_envelope(json.dumps(raw))


@dataclass
class F:
    """A frame as the ABI hands it over."""

    payload: Any
    next: list[str]
    headers: dict[str, Any] = field(default_factory=dict)
    deadline_at: str | None = None


def _entry(raw: dict[str, Any] = HOP_INPUT, actor: str = "analyze", now: str = "2026-03-01T10:00:02Z") -> Envelope:
    return routing.entry_update(_parse(raw), actor, now)


def _frame_of(entry: Envelope, payload: Any, next_actors: list[str] | None = None) -> F:
    return F(
        payload=payload,
        next=list(entry.route.next if next_actors is None else next_actors),
        headers=dict(entry.headers),
        deadline_at=entry.status.deadline_at if entry.status else None,
    )


def test_p_route_3_spec_example_one_hop() -> None:
    """PROTOCOL 1.5: the frame of `analyze` is sent to `summarize` exactly as the example shows."""
    entry = _entry()
    frame = _frame_of(entry, {**entry.payload, "sentiment": "positive"})
    trace = routing.Trace.for_hop(entry.headers, enabled=True, span_id=lambda: "9c8d7e6f5a4b3c2d")
    out = routing.forward_frame(entry, frame, 0, actor="analyze", now="2026-03-01T10:00:03Z", trace=trace)
    assert out.actor == "summarize"
    assert out.envelope.to_dict() == {
        "id": TASK,
        "route": {"prev": ["normalize", "analyze"], "curr": "summarize", "next": []},
        "headers": {
            "traceparent": "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-9c8d7e6f5a4b3c2d-01",
            "x-asya-flow": "text-pipeline",
            "x-asya-first-attempt": "2026-03-01T10:00:02Z",
            "x-asya-hops": 1,  # P-HOP-1 (R3): the spec's example predates the hop count
        },
        "status": {
            "phase": "pending",
            "actor": "summarize",
            "attempt": 1,
            "max_attempts": 1,
            "created_at": "2026-03-01T10:00:00Z",
            "updated_at": "2026-03-01T10:00:03Z",
            "deadline_at": "2026-03-01T10:05:00Z",
        },
        "payload": {"text": "Hello World", "normalized": "hello world", "sentiment": "positive"},
    }


def test_p_route_2_shift() -> None:
    route = Route(prev=["a"], curr="b", next=["c", "d"])
    assert routing.shift(route, ["c", "d"]) == Route(prev=["a", "b"], curr="c", next=["d"])
    assert routing.shift(route, []) == Route(prev=["a", "b"], curr="", next=[])
    assert routing.shift(route, ["z"]) == Route(prev=["a", "b"], curr="z", next=[])
    assert route == Route(prev=["a"], curr="b", next=["c", "d"]), "shift must not mutate its input"


def test_p_route_4_exhausted_route_goes_to_sink_succeeded() -> None:
    entry = _entry()
    frame = _frame_of(entry, {"done": True}, next_actors=[])
    out = routing.forward_frame(entry, frame, 0, actor="analyze", now="2026-03-01T10:00:03Z", trace=NO_TRACE)
    assert out.actor == "x-sink"
    env = out.envelope.to_dict()
    assert env["route"] == {"prev": ["normalize", "analyze"], "curr": "", "next": []}
    assert env["status"] == {
        "phase": "succeeded",
        "reason": "Completed",
        "actor": "analyze",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:03Z",
        "deadline_at": "2026-03-01T10:05:00Z",
    }
    assert env["payload"] == {"done": True}


def test_p_route_5_zero_frames_keeps_route_input_payload_and_end_headers() -> None:
    entry = _entry()
    end_headers = {**entry.headers, "added-by-handler": 1}
    out = routing.zero_frames_envelope(
        entry,
        actor="analyze",
        now="2026-03-01T10:00:03Z",
        headers=end_headers,
        payload=HOP_INPUT["payload"],
        trace=NO_TRACE,
    )
    env = out.envelope.to_dict()
    assert out.actor == "x-sink"
    assert env["route"] == HOP_INPUT["route"]
    assert env["payload"] == HOP_INPUT["payload"]
    assert env["headers"]["added-by-handler"] == 1
    assert env["status"]["phase"] == "succeeded"
    assert env["status"]["reason"] == "Completed"
    assert env["status"]["actor"] == "analyze"
    assert env["status"]["deadline_at"] == "2026-03-01T10:05:00Z"


def test_p_fan_2_spec_example_fan_out_ids_and_parent_id() -> None:
    """PROTOCOL section 6: `split` yields three chunks; frame 0 keeps the id, others are new UUID4 children."""
    raw = {
        **HOP_INPUT,
        "route": {"prev": ["normalize"], "curr": "split", "next": ["embed"]},
        "status": {**HOP_INPUT["status"], "actor": "split"},
    }
    entry = _entry(raw, actor="split")
    ids = iter(["0d4f3c8e-6a1b-4c2d-9e8f-7a6b5c4d3e21", "c1e2d3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f"])
    outs = [
        routing.forward_frame(
            entry,
            _frame_of(entry, {"chunk": i, "text": text}),
            i,
            actor="split",
            now="2026-03-01T10:00:04Z",
            trace=NO_TRACE,
            new_id=lambda: next(ids),
        ).envelope.to_dict()
        for i, text in enumerate(["hello", "world", "again"])
    ]
    assert [(o["id"], o.get("parent_id")) for o in outs] == [
        (TASK, None),
        ("0d4f3c8e-6a1b-4c2d-9e8f-7a6b5c4d3e21", TASK),
        ("c1e2d3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f", TASK),
    ]
    for i, out in enumerate(outs):
        assert out["route"] == {"prev": ["normalize", "split"], "curr": "embed", "next": []}
        assert out["payload"]["chunk"] == i
        # P-FAN-4: children inherit deadline_at, created_at and the frame's headers
        assert out["status"]["created_at"] == "2026-03-01T10:00:00Z"
        assert out["status"]["deadline_at"] == "2026-03-01T10:05:00Z"
        assert out["headers"]["x-asya-flow"] == "text-pipeline"


def test_p_fan_2_frame_zero_keeps_input_parent_id_and_child_ids_are_name_based() -> None:
    """R2: child ids are name-based UUIDs (version 5, lowercase canonical form) of the input id, the hop h =
    len(prev) + 1 and k, so a re-run of the hop, any attempt, yields the same child ids."""
    entry = _entry({**HOP_INPUT, "parent_id": "root-task"})
    assert routing.frame_identity(entry, 0) == (TASK, "root-task")
    child_id, parent = routing.frame_identity(entry, 1)
    assert parent == TASK
    assert child_id != TASK
    assert child_id == str(uuid.UUID(child_id))  # lowercase canonical form
    assert uuid.UUID(child_id).version == 5
    # deterministic: the same hop and index give the same id, on a retry attempt too
    retry = _entry({**HOP_INPUT, "parent_id": "root-task", "status": {**HOP_INPUT["status"], "attempt": 2}})
    assert routing.frame_identity(retry, 1) == (child_id, TASK)
    # distinct per index, per hop and per input id
    assert routing.frame_identity(entry, 2)[0] not in (child_id, TASK)
    later_hop = _entry({**HOP_INPUT, "route": {"prev": ["normalize", "analyze"], "curr": "analyze", "next": []}})
    assert routing.frame_identity(later_hop, 1)[0] != child_id
    other_task = _entry({**HOP_INPUT, "id": "0d4f3c8e-6a1b-4c2d-9e8f-7a6b5c4d3e21"})
    assert routing.frame_identity(other_task, 1)[0] != child_id


def test_p_route_1_route_check_and_override() -> None:
    env = _parse(HOP_INPUT)
    assert routing.route_mismatch(env, "analyze") is None
    assert routing.route_mismatch(env, "other") == "route mismatch: envelope for 'analyze' delivered to 'other'"
    env.headers["x-asya-route-override"] = {"analyze": "analyze-v2"}
    assert routing.route_mismatch(env, "analyze-v2") is None
    assert routing.route_mismatch(env, "analyze") is None


def test_p_route_7_override_target_and_resolved_header() -> None:
    entry = _entry({**HOP_INPUT, "headers": {"x-asya-route-override": {"summarize": "summarize-gpu"}}})
    frame = _frame_of(entry, {"x": 1})
    out = routing.forward_frame(entry, frame, 0, actor="analyze", now="2026-03-01T10:00:03Z", trace=NO_TRACE)
    assert out.actor == "summarize-gpu"
    assert out.envelope.route.curr == "summarize", "route.curr keeps the logical name"
    assert out.envelope.status is not None
    assert out.envelope.status.actor == "summarize"
    assert out.envelope.headers["x-asya-route-resolved"] == {"summarize": {"target": "summarize-gpu", "by": "analyze"}}
    assert "x-asya-route-resolved" not in frame.headers, "the frame's headers must not be mutated"


@pytest.mark.parametrize("crew", ["x-sink", "x-sump"])
def test_p_route_7_overrides_never_apply_to_sink_and_sump(crew: str) -> None:
    headers: dict[str, Any] = {"x-asya-route-override": {crew: "elsewhere"}}
    assert routing.resolve_override(crew, headers, by="a") == crew
    assert "x-asya-route-resolved" not in headers


@pytest.mark.parametrize("target", ["x-sink", "x-sump", "x-pause", "x-fanin-analyze"])
def test_p_route_7_crew_override_target_is_ignored_with_a_warning(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """R2 (issue 18 defect 2): a frame overridden into x-sink was acked without a final status; the layer now sends
    it to its logical actor and warns."""
    entry = _entry({**HOP_INPUT, "headers": {"x-asya-route-override": {"summarize": target}}})
    frame = _frame_of(entry, {"x": 1})
    with caplog.at_level("WARNING", logger="asya.routing"):
        out = routing.forward_frame(entry, frame, 0, actor="analyze", now="2026-03-01T10:00:03Z", trace=NO_TRACE)
    assert out.actor == "summarize"
    assert "x-asya-route-resolved" not in out.envelope.headers
    assert [r.getMessage() for r in caplog.records] == [
        f"route override of 'summarize' to crew actor '{target}' ignored (P-ROUTE-7)"
    ]


@pytest.mark.parametrize("target", ["", 5, None])
def test_p_route_7_empty_or_non_string_override_is_ignored(target: object) -> None:
    headers: dict[str, Any] = {"x-asya-route-override": {"b": target}}
    assert routing.resolve_override("b", headers, by="a") == "b"


def test_p_proc_4_entry_update_new_actor() -> None:
    raw = {
        **HOP_INPUT,
        "status": {
            **HOP_INPUT["status"],
            "phase": "retrying",
            "actor": "normalize",
            "attempt": 3,
            "max_attempts": 5,
            "reason": "X",
            "error": {"message": "old"},
        },
    }
    entry = _entry(raw, now="2026-03-01T10:00:09Z")
    assert entry.status is not None
    assert entry.status.to_dict() == {
        "phase": "processing",
        "actor": "analyze",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:09Z",
        "deadline_at": "2026-03-01T10:05:00Z",
    }
    assert entry.headers["x-asya-first-attempt"] == "2026-03-01T10:00:09Z"


def test_p_proc_4_entry_update_retry_of_this_actor_keeps_attempts_and_first_attempt() -> None:
    raw = {
        **HOP_INPUT,
        "status": {**HOP_INPUT["status"], "phase": "retrying", "attempt": 2, "max_attempts": 3},
    }
    source = _parse(raw)
    entry = routing.entry_update(source, "analyze", "2026-03-01T10:00:09Z")
    assert entry.status is not None
    assert (entry.status.attempt, entry.status.max_attempts) == (2, 3)
    assert entry.headers["x-asya-first-attempt"] == "2026-03-01T10:00:01Z"
    assert source.status is not None and source.status.phase == "retrying", "the input must not be mutated"


def test_p_proc_4_retry_with_unparseable_first_attempt_is_restamped() -> None:
    raw = {
        **HOP_INPUT,
        "headers": {"x-asya-first-attempt": "yesterday"},
        "status": {**HOP_INPUT["status"], "phase": "retrying", "attempt": 2, "max_attempts": 3},
    }
    entry = _entry(raw, now="2026-03-01T10:00:09Z")
    assert entry.headers["x-asya-first-attempt"] == "2026-03-01T10:00:09Z"


def test_p_env_6_entry_update_without_status_sets_created_at_now() -> None:
    entry = _entry(
        {"id": "a", "route": {"prev": [], "curr": "analyze", "next": []}, "payload": None}, now="2026-03-01T11:00:00Z"
    )
    assert entry.status is not None
    assert entry.status.created_at == "2026-03-01T11:00:00Z"
    assert entry.status.deadline_at is None


def test_p_res_14_spec_example_error_payload_and_p_res_11_failure_envelope() -> None:
    details = {
        "message": "model returned no text",
        "type": "myapp.errors.EmptyOutput",
        "mro": ["ValueError", "Exception"],
        "traceback": "Traceback (most recent call last):\n...",
    }
    entry = _entry()
    out = routing.failure_envelope(
        entry,
        details,
        actor="analyze",
        now="2026-03-01T10:00:09Z",
        original_payload=HOP_INPUT["payload"],
        trace=NO_TRACE,
    )
    env = out.envelope.to_dict()
    assert out.actor == "x-sink"
    assert env["route"] == HOP_INPUT["route"]
    assert env["headers"]["x-asya-flow"] == "text-pipeline"
    assert env["payload"] == {
        "error": "myapp.errors.EmptyOutput: model returned no text",
        "details": details,
        "original_payload": {"text": "Hello World", "normalized": "hello world"},
    }
    assert env["status"] == {
        "phase": "failed",
        "reason": "RuntimeError",
        "actor": "analyze",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:09Z",
        "deadline_at": "2026-03-01T10:05:00Z",
        "error": details,
    }


def test_p_res_14_error_line_is_one_line() -> None:
    payload = routing.error_payload({"type": "ValueError", "message": "two\nlines"}, None)
    assert payload["error"] == "ValueError: two lines"
    assert payload["details"]["message"] == "two\nlines"


def test_p_err_4_sump_envelope_for_a_known_input() -> None:
    entry = _entry()
    out = routing.sump_envelope(
        reason=Reason.UNKNOWN_ACTOR,
        message="unknown actor 'nope'",
        actor="analyze",
        now="2026-03-01T10:00:09Z",
        envelope=entry,
        trace=NO_TRACE,
        original_payload={"frame": 1},
    )
    env = out.envelope.to_dict()
    assert out.actor == "x-sump"
    assert env["id"] == TASK
    assert env["route"] == HOP_INPUT["route"]
    assert env["headers"]["x-asya-flow"] == "text-pipeline"
    assert env["payload"] == {
        "error": "UnknownActor: unknown actor 'nope'",
        "details": {"message": "unknown actor 'nope'", "type": "UnknownActor"},
        "original_payload": {"frame": 1},
    }
    assert env["status"] == {
        "phase": "failed",
        "reason": "UnknownActor",
        "actor": "analyze",
        "attempt": 1,
        "max_attempts": 1,
        "created_at": "2026-03-01T10:00:00Z",
        "updated_at": "2026-03-01T10:00:09Z",
        "deadline_at": "2026-03-01T10:05:00Z",
        "error": {"message": "unknown actor 'nope'", "type": "UnknownActor"},
    }


def test_p_err_4_sump_envelope_for_an_unparsed_body() -> None:
    out = routing.sump_envelope(
        reason=Reason.PARSE_ERROR,
        message="body is not JSON",
        actor="analyze",
        now="2026-03-01T10:00:09Z",
        trace=NO_TRACE,
        details={"raw_body": "{nope"},
        new_id=lambda: "fresh-id",
    )
    env = out.envelope.to_dict()
    assert env["id"] == "fresh-id"
    assert "parent_id" not in env
    assert env["route"] == {"prev": [], "curr": "x-sump", "next": []}
    assert "headers" not in env
    assert "original_payload" not in env["payload"]
    assert env["payload"]["details"] == {"message": "body is not JSON", "type": "ParseError", "raw_body": "{nope"}
    assert env["status"]["created_at"] == "2026-03-01T10:00:09Z"
    assert env["status"]["attempt"] == 1


@pytest.mark.parametrize(
    ("task_status", "phase", "reason"),
    [
        ("canceled", "canceled", "PreFlightCanceled"),
        ("paused", "paused", "PreFlightPaused"),
    ],
)
def test_p_stat_10_preflight_envelope(task_status: str, phase: str, reason: str) -> None:
    env = _parse(HOP_INPUT)
    out = routing.preflight_envelope(env, task_status, actor="analyze", now="2026-03-01T10:00:09Z", trace=NO_TRACE)
    d = out.envelope.to_dict()
    assert out.actor == "x-sink"
    assert d["route"] == HOP_INPUT["route"]
    assert d["payload"] == HOP_INPUT["payload"]
    assert d["status"] == {
        **HOP_INPUT["status"],
        "phase": phase,
        "reason": reason,
        "updated_at": "2026-03-01T10:00:09Z",
    }


def test_p_stat_10_preflight_envelope_rejects_other_statuses() -> None:
    with pytest.raises(ValueError, match="'running'"):
        routing.preflight_envelope(_parse(HOP_INPUT), "running", actor="a", now="x", trace=NO_TRACE)


def test_p_time_3_sla_envelope() -> None:
    env = _parse(HOP_INPUT)
    trace = routing.Trace.for_hop(env.headers, enabled=False)
    out = routing.sla_envelope(env, actor="analyze", now="2026-03-01T10:05:00Z", trace=trace)
    d = out.envelope.to_dict()
    assert out.actor == "x-sink"
    assert d["route"] == HOP_INPUT["route"]
    assert d["headers"] == {**HOP_INPUT["headers"], "x-asya-hops": 1}  # P-HOP-1 (R3)
    assert d["payload"] == HOP_INPUT["payload"]
    assert d["status"] == {
        **HOP_INPUT["status"],
        "phase": "failed",
        "reason": "Timeout",
        "updated_at": "2026-03-01T10:05:00Z",
        "error": {"message": "SLA deadline expired", "type": "DeadlineExceeded"},
    }


def test_p_trace_1_tracing_off_keeps_the_input_value() -> None:
    trace = routing.Trace.for_hop({"traceparent": TRACEPARENT, "tracestate": "k=v"}, enabled=False)
    assert trace.headers({"traceparent": "00-handler-wrote-this"}) == {
        "traceparent": TRACEPARENT,
        "tracestate": "k=v",
        "x-asya-hops": 1,
    }


def test_p_trace_1_tracing_on_keeps_trace_id_with_a_new_span_per_hop() -> None:
    spans = itertools.cycle(["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"])
    t1 = routing.Trace.for_hop({"traceparent": TRACEPARENT}, enabled=True, span_id=lambda: next(spans))
    t2 = routing.Trace.for_hop({"traceparent": TRACEPARENT}, enabled=True, span_id=lambda: next(spans))
    assert t1.traceparent == "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-aaaaaaaaaaaaaaaa-01"
    assert t2.traceparent == "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-bbbbbbbbbbbbbbbb-01"
    real = routing.Trace.for_hop({"traceparent": TRACEPARENT}, enabled=True)
    assert real.traceparent is not None
    assert real.traceparent.split("-")[1] == "8f1c2d3e4b5a69788796a5b4c3d2e1f0"
    assert real.traceparent.split("-")[2] != "1a2b3c4d5e6f7081"


def test_p_trace_1_malformed_traceparent_passes_unchanged() -> None:
    trace = routing.Trace.for_hop({"traceparent": "garbage"}, enabled=True)
    assert trace.traceparent == "garbage"


def test_p_trace_1_no_input_trace_removes_handler_written_values() -> None:
    source: dict[str, Any] = {"traceparent": "x", "tracestate": "y", "keep": 1}
    assert routing.Trace.for_hop({}, enabled=True).headers(source) == {"keep": 1, "x-asya-hops": 1}
    assert source == {"traceparent": "x", "tracestate": "y", "keep": 1}  # a copy: the source is left alone


def test_p_hdr_3_zero_frames_envelope_drops_a_handler_written_delay_until() -> None:
    """Only a chained retry delay sets x-asya-delay-until (P-RES-9); a value a handler wrote would make x-sink's hook
    copies wait at their hook actor (P-HDR-3)."""
    out = routing.zero_frames_envelope(
        _entry(),
        actor="analyze",
        now="2026-03-01T10:00:09Z",
        headers={"x-asya-flow": "text-pipeline", "x-asya-delay-until": "2099-01-01T00:00:00Z"},
        payload={"p": 1},
        trace=NO_TRACE,
    )
    assert out.envelope.headers == {"x-asya-flow": "text-pipeline"}


@pytest.mark.parametrize("build", ["failure", "sla", "preflight", "sump"])
def test_p_hdr_3_every_derived_envelope_drops_the_inputs_delay_until(build: str) -> None:
    entry = _entry()
    entry.headers["x-asya-delay-until"] = "2099-01-01T00:00:00Z"
    now = "2026-03-01T10:00:09Z"
    if build == "failure":
        out = routing.failure_envelope(
            entry, {"message": "m", "type": "E"}, actor="a", now=now, original_payload=None, trace=NO_TRACE
        )
    elif build == "sla":
        out = routing.sla_envelope(entry, actor="a", now=now, trace=NO_TRACE)
    elif build == "preflight":
        out = routing.preflight_envelope(entry, "canceled", actor="a", now=now, trace=NO_TRACE)
    else:
        out = routing.sump_envelope(
            reason=Reason.ROUTE_MISMATCH, message="m", actor="a", now=now, envelope=entry, trace=NO_TRACE
        )
    assert "x-asya-delay-until" not in out.envelope.headers
    assert out.envelope.headers["x-asya-flow"] == "text-pipeline"


def test_p_trace_1_sump_envelope_carries_the_hops_new_span() -> None:
    entry = _entry()
    entry.headers["traceparent"] = TRACEPARENT
    trace = routing.Trace.for_hop(entry.headers, enabled=True, span_id=lambda: "cccccccccccccccc")
    out = routing.sump_envelope(
        reason=Reason.ROUTE_MISMATCH, message="m", actor="a", now="n", envelope=entry, trace=trace
    )
    assert out.envelope.headers["traceparent"] == "00-8f1c2d3e4b5a69788796a5b4c3d2e1f0-cccccccccccccccc-01"
    assert entry.headers["traceparent"] == TRACEPARENT


def test_outgoing_envelopes_do_not_share_route_lists_with_the_input() -> None:
    entry = _entry()
    out = routing.failure_envelope(
        entry, {"message": "m", "type": "E"}, actor="analyze", now="n", original_payload=None, trace=NO_TRACE
    )
    out.envelope.route.prev.append("mutated")
    assert entry.route.prev == ["normalize"]


def test_status_created_at_missing_on_input_is_now_in_failure_envelopes() -> None:
    env = Envelope(id="a", route=Route([], "analyze", []), payload=1, status=Status(created_at=None))
    out = routing.sla_envelope(env, actor="analyze", now="2026-03-01T10:00:00Z", trace=NO_TRACE)
    assert out.envelope.status is not None
    assert out.envelope.status.created_at == "2026-03-01T10:00:00Z"
