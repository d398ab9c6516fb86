"""x-sink against moto (PROTOCOL 12.1 P-SINK-1..7, 12.3 P-CKPT-1..4, P-ACK-2).

Each outcome is observed in S3 (checkpoints), in the task store and on the x-sump / hook queues, and as
``batchItemFailures``.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from asya.config import ActorConfig
from asya.headers import is_hook_copy
from asya.store import TaskStore
from asya_crew.sink import SinkRuntime
from tests.functional.actors import actor_env, deliver, drain, queue_arn

pytestmark = pytest.mark.functional

NOW = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
ERROR = {"message": "model returned no text", "type": "myapp.errors.EmptyOutput", "mro": ["ValueError", "Exception"]}


class Sink:
    """x-sink wired to the moto mesh, with helpers to feed it and read queues and the bucket."""

    def __init__(self, mesh: Any, *, bucket: str | None = None, hooks: str = "", logger: Any = None) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.bucket = bucket or mesh.resources.bucket
        config = ActorConfig.from_env(actor_env(mesh, "x-sink", ASYA_BUCKET=self.bucket, ASYA_SINK_HOOKS=hooks))
        self.runtime = SinkRuntime(
            config,
            sqs=self.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=lambda: NOW,
            logger=logger or logging.getLogger("test.x-sink"),
        )
        self.store = TaskStore(
            table=mesh.resources.table,
            bucket=mesh.resources.bucket,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=lambda: NOW,
        )

    def run(self, *bodies: str | dict[str, Any]) -> list[int]:
        """Deliver ``bodies`` through the x-sink queue as one batch; the indexes of the failed records."""
        url = self.mesh.resources.queue_urls["x-sink"]
        event = deliver(self.sqs, url, bodies, arn=queue_arn(self.mesh, "x-sink"))
        response = self.runtime.handle(event, None)
        ids = [r["messageId"] for r in event["Records"]]
        return [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]]

    def drain(self, actor: str) -> list[dict[str, Any]]:
        return drain(self.sqs, self.mesh.resources.queue_urls[actor])

    def keys(self, prefix: str = "") -> list[str]:
        listing = self.mesh.aws.s3.list_objects_v2(Bucket=self.mesh.resources.bucket, Prefix=prefix)
        return [obj["Key"] for obj in listing.get("Contents", [])]

    def object(self, key: str) -> tuple[dict[str, Any], str]:
        obj = self.mesh.aws.s3.get_object(Bucket=self.mesh.resources.bucket, Key=key)
        return json.loads(obj["Body"].read()), obj["ContentType"]


@pytest.fixture
def sink(mesh: Any) -> Sink:
    return Sink(mesh)


def envelope(
    env_id: str = "t1",
    *,
    phase: str = "succeeded",
    payload: Any = None,
    headers: dict[str, Any] | None = None,
    parent_id: str | None = None,
    **status: Any,
) -> dict[str, Any]:
    env: dict[str, Any] = {
        "id": env_id,
        "route": {"prev": ["normalize", "analyze"], "curr": "summarize", "next": []},
        "headers": headers or {"x-asya-flow": "text-pipeline"},
        "status": {
            "phase": phase,
            "actor": "summarize",
            "attempt": 1,
            "max_attempts": 1,
            "created_at": "2026-03-01T23:59:00Z",
            "updated_at": "2026-03-01T23:59:58Z",
            **status,
        },
        "payload": {"summary": "A friendly greeting."} if payload is None else payload,
    }
    if phase == "succeeded":
        env["status"]["reason"] = "Completed"
    if parent_id is not None:
        env["parent_id"] = parent_id
    return env


def failed_envelope(env_id: str = "t1", **kwargs: Any) -> dict[str, Any]:
    payload = {
        "error": "myapp.errors.EmptyOutput: model returned no text",
        "details": ERROR,
        "original_payload": {"text": "hi"},
    }
    return envelope(env_id, phase="failed", payload=payload, reason="PolicyExhausted", error=ERROR, **kwargs)


def test_p_sink_5_succeeded_checkpoint_and_final_status(sink: Sink) -> None:
    """Also P-CKPT-4: the checkpoint key is recorded on the task record as ``checkpoint_key``."""
    sink.store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload={"text": "hi"})
    env = envelope()
    assert sink.run(env) == []
    # P-CKPT-1: date of status.updated_at (not of now), P-CKPT-3: whole envelope, JSON content type
    key = "succeeded/2026-03-01/t1.json"
    assert sink.keys() == [key]
    body, content_type = sink.object(key)
    assert content_type == "application/json"
    assert body == env
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "succeeded"
    assert view["result"] == {"summary": "A friendly greeting."}
    assert view["checkpoint_key"] == key and view["progress_percent"] == 100
    assert sink.drain("x-sump") == []


def test_p_sink_5_failed_reports_error_and_forwards_to_sump(sink: Sink) -> None:
    """Also P-CKPT-4: ``checkpoint_key`` is recorded with the failed status too."""
    sink.store.create_task(task_id="t1", actor="normalize")
    env = failed_envelope()
    assert sink.run(env) == []
    key = "failed/2026-03-01/t1.json"
    assert sink.object(key)[0] == env
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed"
    assert view["error"] == "model returned no text"
    assert view["error_details"] == ERROR
    assert view["failed_actor"] == "summarize"
    assert view["checkpoint_key"] == key
    assert sink.drain("x-sump") == [env]


def test_p_sink_5_a_huge_error_message_is_clipped_on_the_task_and_kept_whole_in_error_details(sink: Sink) -> None:
    """GW-DATA-8: a handler's exception message can be any size; x-sink's final write must still land (P-ACK-2), so
    ``error`` on the task item is cut to 256 bytes with an ellipsis (R2) while ``error_details`` (result item, S3 over
    64 KiB, GW-DATA-6) keeps the whole text."""
    sink.store.create_task(task_id="t1", actor="normalize")
    message = "é" * 50_000  # 100,000 bytes: error_details goes to S3
    error = {**ERROR, "message": message}
    env = envelope(phase="failed", payload={"error": "boom"}, reason="PolicyExhausted", error=error)
    assert sink.run(env) == []
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "failed"
    assert view["error"] == "é" * 126 + "\u2026"  # 252 + 3 bytes: no room for another 2-byte character
    assert view["error_details"] == error
    snap = sink.store.snapshot("t1", 0)
    assert snap is not None
    assert snap.data["error"] == view["error"] and snap.last_seq == 2


def test_p_sink_5_error_falls_back_to_payload_error(sink: Sink) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    env = envelope(phase="failed", payload={"error": "boom: it broke", "details": {"message": "it broke"}})
    assert sink.run(env) == []
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["error"] == "boom: it broke" and view["error_details"] == {"message": "it broke"}


@pytest.mark.parametrize(
    "case",
    ["stealth", "child", "no_record"],
)
def test_p_sink_5_checkpoint_without_status_write(sink: Sink, mesh: Any, case: str) -> None:
    """P-STAT-12 stealth, a child (``parent_id``) and an untracked id: checkpoint only."""
    if case != "no_record":
        sink.store.create_task(task_id="t1", actor="normalize")
    headers = {"x-asya-mesh-status": "OFF"} if case == "stealth" else None
    env = envelope(headers=headers, parent_id="p1" if case == "child" else None)
    assert sink.run(env) == []
    assert sink.keys() == ["succeeded/2026-03-01/t1.json"]
    if case == "no_record":
        assert mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"] == []
    else:
        view = sink.store.get_task("t1")
        assert view is not None
        assert view["status"] == "pending" and view["last_event_id"] == 1


def test_p_ckpt_2_origin_id_names_checkpoint_and_task(sink: Sink) -> None:
    sink.store.create_task(task_id="origin-1", actor="split")
    assert sink.run(envelope("merged-9", headers={"x-asya-origin-id": "../../origin-1"})) == []
    assert sink.keys() == ["succeeded/2026-03-01/origin-1.json"]
    # the sanitised name is only the key: the status goes to the origin id as given
    assert sink.store.get_task("origin-1")["status"] == "pending"  # type: ignore[index]
    assert sink.run(envelope("merged-8", headers={"x-asya-origin-id": "origin-1"})) == []
    view = sink.store.get_task("origin-1")
    assert view is not None
    assert view["status"] == "succeeded" and view["checkpoint_key"] == "succeeded/2026-03-01/origin-1.json"


@pytest.mark.parametrize("phase", ["canceled", "paused", "pending"])
def test_p_sink_4_other_phases_are_acked_without_effects(sink: Sink, phase: str) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope(phase=phase)) == []
    assert sink.keys() == []
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]
    assert sink.drain("x-sump") == []


def test_p_sink_5_checkpoint_failure_fails_the_record(mesh: Any) -> None:
    sink = Sink(mesh, bucket="asya-demo-no-such-bucket")
    sink.store.create_task(task_id="t1", actor="normalize")
    sink.store.create_task(task_id="t2", actor="normalize")
    assert sink.run(envelope("t1"), envelope("t2")) == [0, 1]
    # nothing after the failed checkpoint happened
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]
    assert sink.drain("x-sump") == []


def test_p_sink_7_redelivery_is_idempotent(sink: Sink) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    env = failed_envelope()
    assert sink.run(env) == []
    assert sink.run(env) == []
    assert sink.keys() == ["failed/2026-03-01/t1.json"]
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["last_event_id"] == 2
    assert len(sink.drain("x-sump")) == 2  # x-sump may receive a duplicate


def test_p_sink_2_hook_copies(sink: Sink) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    hook = {"x-asya-sink-hook": {"hook": "analyze", "phase": "failed"}}
    failed = failed_envelope(headers=hook)
    assert sink.run(failed, envelope("t2", headers={"x-asya-sink-hook": {"hook": "analyze", "phase": "x"}})) == []
    assert sink.drain("x-sump") == [failed]
    assert sink.keys() == []
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]


def test_p_sink_3_failed_fan_in_partial_fails_the_origin(sink: Sink) -> None:
    sink.store.create_task(task_id="origin-1", actor="split")
    fan_in = {"x-asya-fan-in": {"origin_id": "origin-1", "slice_index": 1, "slice_count": 3, "aggregation_key": "k"}}
    partial = failed_envelope("child-1", headers=fan_in, parent_id="origin-1")
    ok_partial = envelope("child-2", headers=fan_in, parent_id="origin-1")
    assert sink.run(partial, ok_partial) == []
    view = sink.store.get_task("origin-1")
    assert view is not None
    assert view["status"] == "failed" and view["error"] == "model returned no text"
    assert "checkpoint_key" not in view
    assert sink.keys() == []
    assert sink.drain("x-sump") == [partial]


def test_p_sink_6_hooks_get_copies_and_a_missing_hook_fails_the_record(mesh: Any) -> None:
    """Also P-TIME-2 (hook copies keep ``deadline_at``) and P-STAT-13 (each copy is one the layer treats as
    untracked)."""
    sink = Sink(mesh, hooks="analyze,no-such-hook,split")
    sink.store.create_task(task_id="t1", actor="normalize")
    env = failed_envelope(deadline_at="2026-03-02T08:05:00Z")
    assert sink.run(env) == [0]
    for hook in ("analyze", "split"):
        [copy] = sink.drain(hook)
        assert copy["id"] == "t1"
        assert copy["route"] == {"prev": ["normalize", "analyze", "summarize"], "curr": hook, "next": []}
        assert copy["headers"]["x-asya-sink-hook"] == {"hook": hook, "phase": "failed"}
        assert copy["headers"]["x-asya-flow"] == "text-pipeline"
        assert copy["status"]["phase"] == "pending" and copy["status"]["actor"] == hook
        assert copy["status"]["created_at"] == "2026-03-01T23:59:00Z"
        assert copy["status"]["deadline_at"] == "2026-03-02T08:05:00Z"
        assert is_hook_copy(copy["headers"]), "untracked at the hook actor (P-STAT-13)"
        assert copy["payload"] == env["payload"]
    # the checkpoint, the final status and the x-sump forward still happened before the record failed
    assert sink.store.get_task("t1")["status"] == "failed"  # type: ignore[index]
    assert sink.drain("x-sump") == [env]


def test_p_sink_6_a_child_envelope_gets_no_hook_copies(mesh: Any) -> None:
    sink = Sink(mesh, hooks="analyze")
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope("child-1", parent_id="t1")) == []
    assert sink.drain("analyze") == []  # hooks run for root envelopes only
    assert sink.keys("succeeded/") != []  # the child was still checkpointed


def test_p_sink_3_a_failed_fan_in_partial_in_stealth_mode_is_not_reported(sink: Sink) -> None:
    sink.store.create_task(task_id="origin-1", actor="split")
    fan_in = {"x-asya-fan-in": {"origin_id": "origin-1", "slice_index": 1, "slice_count": 3, "aggregation_key": "k"}}
    partial = failed_envelope("child-1", headers={**fan_in, "x-asya-mesh-status": "off"}, parent_id="origin-1")
    assert sink.run(partial) == []
    assert sink.store.get_task("origin-1")["status"] == "pending"  # type: ignore[index]
    assert sink.drain("x-sump") == [partial]


def test_p_stat_11_p_proc_3_no_preflight_or_sla_check_at_x_sink(sink: Sink) -> None:
    """x-sink runs no route check, pre-flight or SLA check (P-PROC-3, P-STAT-11, P-TIME-4): a succeeded envelope for a
    canceled task and one whose ``deadline_at`` passed an hour ago (both routed to ``summarize``, not x-sink) are
    checkpointed as they came and acked; neither is turned into a canceled or Timeout envelope sent back to x-sink."""
    sink.store.create_task(task_id="t-canceled", actor="normalize")
    assert sink.store.cancel("t-canceled") == "canceled"
    sink.store.create_task(task_id="t-late", actor="normalize")
    expired = "2026-03-02T07:00:00Z"  # NOW - 1 h
    canceled = envelope("t-canceled", deadline_at=expired)
    late = envelope("t-late", deadline_at=expired)
    assert sink.run(canceled, late) == []
    assert sorted(sink.keys()) == ["succeeded/2026-03-01/t-canceled.json", "succeeded/2026-03-01/t-late.json"]
    assert sink.object("succeeded/2026-03-01/t-canceled.json")[0] == canceled
    assert sink.object("succeeded/2026-03-01/t-late.json")[0] == late
    view = sink.store.get_task("t-canceled")
    assert view is not None
    assert view["status"] == "canceled", "the first terminal write wins (P-STAT-2)"
    assert view["checkpoint_key"] == "succeeded/2026-03-01/t-canceled.json"
    view = sink.store.get_task("t-late")
    assert view is not None
    assert view["status"] == "succeeded" and view["result"] == late["payload"]
    assert sink.drain("x-sink") == []
    assert sink.drain("x-sump") == []


def test_p_err_4_unparseable_body_goes_to_sump(sink: Sink) -> None:
    assert sink.run("{not json") == []
    [out] = sink.drain("x-sump")
    assert out["status"]["phase"] == "failed" and out["status"]["reason"] == "ParseError"
    assert out["status"]["actor"] == "x-sink"
    assert out["route"] == {"prev": [], "curr": "x-sump", "next": []}
    assert out["payload"]["details"]["raw_body"] == "{not json"
    assert "original_payload" not in out["payload"]


def test_p_err_4_a_body_naming_a_valid_id_keeps_it_at_sump(sink: Sink) -> None:
    """The same rule as the actor layer's step 1 (``asya.infra.parse_failure_envelope``): the id survives."""
    assert sink.run('{"id": "t-9", "route": 5, "headers": {"x-asya-flow": "f"}, "status": {"attempt": 2}}') == []
    [out] = sink.drain("x-sump")
    assert out["id"] == "t-9"
    assert out["status"]["reason"] == "ParseError"
    assert out["route"] == {"prev": [], "curr": "x-sump", "next": []}
    assert out["headers"] == {"x-asya-flow": "f"}  # what parsed is kept (P-HDR-1)
    assert out["status"]["attempt"] == 2


def test_p_large_4_payload_reference_does_not_break(sink: Sink) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    ref = {"__ref__": "s3://asya-demo-storage/payloads/t1/0003-x-sink-0a1b2c3d.json"}
    assert sink.run(envelope(payload=ref)) == []
    assert sink.store.get_task("t1")["result"] == ref  # type: ignore[index]


def test_p_ack_3_failed_record_logs_why_in_one_line(mesh: Any, caplog: pytest.LogCaptureFixture) -> None:
    """P-SINK-5 (b), P-ACK-3: a failed checkpoint fails the record; one WARNING line names the record and the error,
    without a traceback (Powertools logs record failures at DEBUG only)."""
    sink = Sink(mesh, bucket="asya-demo-no-such-bucket")
    with caplog.at_level(logging.WARNING, logger="test.x-sink"):
        assert sink.run(envelope("t1")) == [0]
    [failed] = [r for r in caplog.records if r.getMessage() == "record failed: SQS delivers it again"]
    assert failed.levelno == logging.WARNING and failed.exc_info is None
    assert failed.__dict__["message_id"]
    assert failed.__dict__["error_type"] == "asya_crew.checkpoint.CheckpointError"
    assert "asya-demo-no-such-bucket" in failed.__dict__["error"]


def test_p_trace_4_x_sink_log_lines_carry_actor_attempt_phase_and_correlation_id(mesh: Any) -> None:
    stream = io.StringIO()
    logger = Logger(service=f"test-x-sink-{uuid.uuid4()}", logger_handler=logging.StreamHandler(stream))
    sink = Sink(mesh, logger=logger)
    sink.store.create_task(task_id="t-logs", actor="normalize")
    done = envelope("t-logs")
    done["status"]["attempt"] = 2
    assert sink.run(done) == []
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [finished] = [line for line in lines if line["message"] == "envelope finished"]
    assert (finished["actor"], finished["correlation_id"], finished["attempt"], finished["phase"]) == (
        "x-sink",
        "t-logs",
        2,
        "succeeded",
    )
