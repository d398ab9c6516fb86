"""x-sink against moto (PROTOCOL 12.1 P-SINK-1..7, 12.3 P-CKPT-1..4, P-ACK-2).

Each outcome is observed in S3 (JSON Lines checkpoints), in the task store and on the x-sump / hook queues, and as
``batchItemFailures``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from asya.config import ActorConfig
from asya.headers import is_hook_copy
from asya.store import TaskStore
from asya.store.limits import ERROR_LIMIT_BYTES
from asya.tableschema import checkpoint_key, key_shard
from asya_crew.sink import SinkRuntime
from tests.clocks import SqsClock
from tests.functional.actors import Context, actor_env, deliver, drain, queue_arn

pytestmark = pytest.mark.functional

NOW = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
#: P-CKPT-1, P-CKPT-2, GW-DATA-9: ``{phase}/{shard}/{YYYY-MM-DD}/{uuid4}.jsonl``; nothing of an envelope in the
#: last part
KEY = re.compile(
    r"(succeeded|failed)/[0-9a-f]/\d{4}-\d{2}-\d{2}/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl"
)


def _unsharded(key: str) -> str:
    """``key`` without its shard (GW-DATA-9), which must be the one its name hashes to."""
    phase, shard, day, name = key.split("/")
    assert shard == key_shard(name.removesuffix(".jsonl")), key
    return f"{phase}/{day}/{name}"


ERROR = {"message": "model returned no text", "type": "myapp.errors.EmptyOutput", "mro": ["ValueError", "Exception"]}


class Sink:
    """x-sink wired to the moto mesh, with helpers to feed it and read queues and the bucket."""

    def __init__(
        self,
        mesh: Any,
        *,
        bucket: str | None = None,
        hooks: str = "",
        logger: Any = None,
        new_key_id: Callable[[], str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.bucket = bucket or mesh.resources.bucket
        config = ActorConfig.from_env(
            actor_env(mesh, "x-sink", ASYA_BUCKET=self.bucket, ASYA_SINK_HOOKS=hooks, **(env or {}))
        )
        self.runtime = SinkRuntime(
            config,
            sqs=self.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=lambda: NOW,
            logger=logger or logging.getLogger("test.x-sink"),
            new_key_id=new_key_id,
        )
        self.message_ids: list[str] = []
        self.store = TaskStore(
            table=mesh.resources.table,
            bucket=mesh.resources.bucket,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=lambda: NOW,
        )

    def run(self, *bodies: str | dict[str, Any], context: Any = None) -> list[int]:
        """Deliver ``bodies`` through the x-sink queue as one batch; the indexes of the failed records."""
        url = self.mesh.resources.queue_urls["x-sink"]
        event = deliver(self.sqs, url, bodies, arn=queue_arn(self.mesh, "x-sink"))
        response = self.runtime.handle(event, context)
        ids = [r["messageId"] for r in event["Records"]]
        self.message_ids = ids
        return [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]]

    def drain(self, actor: str) -> list[dict[str, Any]]:
        return drain(self.sqs, self.mesh.resources.queue_urls[actor])

    def keys(self, prefix: str = "") -> list[str]:
        listing = self.mesh.aws.s3.list_objects_v2(Bucket=self.mesh.resources.bucket, Prefix=prefix)
        return [obj["Key"] for obj in listing.get("Contents", [])]

    def object(self, key: str) -> tuple[list[dict[str, Any]], str]:
        """The lines of the JSON Lines object ``key``, parsed, and its content type."""
        obj = self.mesh.aws.s3.get_object(Bucket=self.mesh.resources.bucket, Key=key)
        text = obj["Body"].read().decode("utf-8")
        assert text.endswith("\n")
        return [json.loads(line) for line in text.split("\n")[:-1]], obj["ContentType"]

    def line(self, task_id: str) -> dict[str, Any]:
        """The checkpoint line the task view points at (P-CKPT-4)."""
        view = self.store.get_task(task_id)
        assert view is not None
        lines, _ = self.object(view["checkpoint_key"])
        line: dict[str, Any] = lines[view["checkpoint_line"] - 1]
        return line

    def task_item(self, task_id: str) -> dict[str, Any]:
        key = {"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": "TASK"}}
        item: dict[str, Any] = self.mesh.aws.dynamodb.get_item(TableName=self.mesh.resources.table, Key=key)["Item"]
        return item


def key_ids(*ids: str) -> Callable[[], str]:
    """``new_key_id`` answering ``ids`` in turn (to aim a PUT at an object that exists)."""
    supply: Iterator[str] = iter(ids)
    return lambda: next(supply)


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
    """P-CKPT-1/3/4: one JSON Lines object, dated by ``status.updated_at`` (not now), named by a UUID4, holding the
    whole envelope; the task records its key and 1-based line, and ``terminal_by`` = the record's message id."""
    sink.store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload={"text": "hi"})
    env = envelope()
    assert sink.run(env) == []
    [key] = sink.keys()
    assert KEY.fullmatch(key) and _unsharded(key).startswith("succeeded/2026-03-01/")
    lines, content_type = sink.object(key)
    assert content_type == "application/x-ndjson"
    assert lines == [env]
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "succeeded"
    assert view["result"] == {"summary": "A friendly greeting."}
    assert (view["checkpoint_key"], view["checkpoint_line"]) == (key, 1) and view["progress_percent"] == 100
    assert view["checkpoint_uri"] == f"s3://{sink.bucket}/{key}"
    assert view["data"]["checkpoint_key"] == key and view["data"]["checkpoint_line"] == 1
    assert sink.task_item("t1")["terminal_by"] == {"S": sink.message_ids[0]}
    assert sink.drain("x-sump") == []


def test_p_sink_5_failed_reports_error_and_forwards_to_sump_with_x_asya_checkpointed(sink: Sink) -> None:
    """Also P-CKPT-4 (key and line recorded with the failed status too) and P-SINK-5 (e): the forward carries
    ``x-asya-checkpointed = {"key", "line"}`` so x-sump does not checkpoint it again (P-SUMP-4)."""
    sink.store.create_task(task_id="t1", actor="normalize")
    env = failed_envelope()
    assert sink.run(env) == []
    [key] = sink.keys()
    assert KEY.fullmatch(key) and _unsharded(key).startswith("failed/2026-03-01/")
    assert sink.object(key)[0] == [env]
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed"
    assert view["error"] == "model returned no text"
    assert view["error_details"] == ERROR
    assert view["failed_actor"] == "summarize"
    assert (view["checkpoint_key"], view["checkpoint_line"]) == (key, 1)
    assert sink.task_item("t1")["terminal_by"] == {"S": sink.message_ids[0]}
    forwarded = {**env, "headers": {**env["headers"], "x-asya-checkpointed": {"key": key, "line": 1}}}
    assert sink.drain("x-sump") == [forwarded]


def test_p_ckpt_1_a_batch_of_mixed_phases_and_dates_makes_one_object_per_phase_and_date(sink: Sink) -> None:
    """P-CKPT-1, P-CKPT-3: one object per (phase, date of ``status.updated_at``, now when absent), lines in record
    order; records needing no checkpoint (another phase, a hook copy, a fan-in partial) are left out; each task's
    ``checkpoint_line`` points at its own envelope (P-CKPT-4)."""
    fan_in = {"x-asya-fan-in": {"origin_id": "t-origin", "slice_index": 0, "slice_count": 2, "aggregation_key": "k"}}
    batch = [
        envelope("s1"),  # succeeded, 2026-03-01
        failed_envelope("f1"),  # failed, 2026-03-01
        envelope("s2", updated_at="2026-03-02T00:00:01Z"),  # succeeded, 2026-03-02
        envelope("c1", phase="canceled"),  # no checkpoint (P-SINK-4)
        envelope("s3"),  # succeeded, 2026-03-01: second line of the first object
        envelope("h1", headers={"x-asya-sink-hook": {"hook": "analyze", "phase": "succeeded"}}),  # P-SINK-2
        envelope("p1", headers=fan_in, parent_id="t-origin"),  # P-SINK-3: no checkpoint
        failed_envelope("f2", updated_at="2026-02-28T23:59:59+00:00"),  # failed, 2026-02-28
        envelope("s4", updated_at=None),  # no updated_at: today (NOW), 2026-03-02: with s2
    ]
    batch[-1]["status"].pop("updated_at")
    for env in batch:
        sink.store.create_task(task_id=env["id"], actor="normalize")
    assert sink.run(*batch) == []
    keys = sink.keys()
    assert len(keys) == 4 and all(KEY.fullmatch(key) for key in keys)
    by_prefix = {_unsharded(key).rsplit("/", 1)[0]: sink.object(key) for key in keys}
    assert by_prefix == {
        "succeeded/2026-03-01": ([batch[0], batch[4]], "application/x-ndjson"),
        "succeeded/2026-03-02": ([batch[2], batch[8]], "application/x-ndjson"),
        "failed/2026-03-01": ([batch[1]], "application/x-ndjson"),
        "failed/2026-02-28": ([batch[7]], "application/x-ndjson"),
    }
    for env in (batch[0], batch[1], batch[2], batch[4], batch[7], batch[8]):
        assert sink.line(env["id"]) == env
    assert [sink.store.get_task(env["id"])["checkpoint_line"] for env in batch[:3]] == [1, 1, 1]  # type: ignore[index]
    assert sink.store.get_task("s3")["checkpoint_line"] == 2  # type: ignore[index]
    for untouched in ("c1", "h1"):
        view = sink.store.get_task(untouched)
        assert view is not None and view["status"] == "pending" and "checkpoint_key" not in view
    assert [e["id"] for e in sink.drain("x-sump")] == ["f1", "f2"]


def test_p_ckpt_1_a_failed_put_fails_every_record_it_holds_and_nothing_else(mesh: Any) -> None:
    """P-CKPT-1: the first object's key is taken (``If-None-Match: *`` refuses it), so its PUT fails: both of its
    records fail before any status write or send; the other object's record goes on. The object that was there is
    not overwritten."""
    taken = "0f0e0d0c-0b0a-4909-8807-060504030201"
    sink = Sink(mesh, new_key_id=key_ids(taken, str(uuid.uuid4())))
    victim = checkpoint_key("succeeded", "2026-03-01", taken)
    mesh.aws.s3.put_object(Bucket=sink.bucket, Key=victim, Body=b'{"id": "victim"}\n')
    for task_id in ("t1", "t2", "t3"):
        sink.store.create_task(task_id=task_id, actor="normalize")
    assert sink.run(envelope("t1"), failed_envelope("t2"), envelope("t3")) == [0, 2]
    assert sink.object(victim)[0] == [{"id": "victim"}]
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]
    assert sink.store.get_task("t3")["status"] == "pending"  # type: ignore[index]
    view = sink.store.get_task("t2")
    assert view is not None and view["status"] == "failed" and view["checkpoint_line"] == 1
    assert [e["id"] for e in sink.drain("x-sump")] == ["t2"]


def test_p_sink_5_a_huge_error_message_is_clipped_on_the_task_and_kept_whole_in_error_details(sink: Sink) -> None:
    """GW-DATA-8: a handler's exception message can be any size; x-sink's final write must still land (P-ACK-2), so
    ``error`` on the task item is clipped to the store's limit with an ellipsis while ``error_details`` (result item,
    S3 over its limit, GW-DATA-6) keeps the whole text."""
    sink.store.create_task(task_id="t1", actor="normalize")
    message = "é" * 50_000  # 100,000 bytes: error_details goes to S3
    error = {**ERROR, "message": message}
    env = envelope(phase="failed", payload={"error": "boom"}, reason="PolicyExhausted", error=error)
    assert sink.run(env) == []
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "failed"
    assert view["error"].startswith("é" * 100) and view["error"].endswith("…")
    assert len(view["error"].encode("utf-8")) <= ERROR_LIMIT_BYTES
    assert view["error_details"] == error
    assert view["data"]["error"] == view["error"]


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
    [key] = sink.keys()
    assert sink.object(key)[0] == [env]
    if case == "no_record":
        assert mesh.aws.dynamodb.scan(TableName=mesh.resources.table)["Items"] == []
    else:
        view = sink.store.get_task("t1")
        assert view is not None
        assert view["status"] == "pending" and view["last_event_id"] == 1


def test_p_sink_5_origin_id_names_the_task(sink: Sink) -> None:
    """The status goes to ``x-asya-origin-id`` as given: ``../../origin-1`` is another (unknown) task."""
    sink.store.create_task(task_id="origin-1", actor="split")
    assert sink.run(envelope("merged-9", headers={"x-asya-origin-id": "../../origin-1"})) == []
    assert sink.store.get_task("origin-1")["status"] == "pending"  # type: ignore[index]
    merged = envelope("merged-8", headers={"x-asya-origin-id": "origin-1"})
    assert sink.run(merged) == []
    view = sink.store.get_task("origin-1")
    assert view is not None
    assert view["status"] == "succeeded" and sink.line("origin-1") == merged


@pytest.mark.parametrize(
    "attack",
    [
        {"id": "x/{victim}"},
        {"id": "../{victim}"},
        {"id": "../"},
        {"id": "../../succeeded/2026-03-01/{victim}"},
        {"id": "a\\..\\{victim}"},
        {"id": "evil", "headers": {"x-asya-origin-id": "x/{victim}"}},
        {"id": "evil", "headers": {"x-asya-origin-id": "../../failed/2026-03-01/{victim}"}},
    ],
)
def test_p_ckpt_2_an_id_can_never_steer_a_key(sink: Sink, attack: dict[str, Any]) -> None:
    """Issue 18 defect 5: an envelope whose id (or origin id) is ``x/<victim id>`` overwrote the victim's checkpoint.
    Keys are ``{phase}/{date}/{uuid4}.jsonl`` whatever the ids: the victim's line stays as written and every key
    matches the pattern."""
    sink.store.create_task(task_id="victim", actor="normalize")
    victim = envelope("victim")
    assert sink.run(victim) == []
    [victim_key] = sink.keys()
    headers = {k: v.format(victim="victim") for k, v in attack.get("headers", {}).items()}
    forged = envelope(attack["id"].format(victim="victim"), payload={"forged": True}, headers=headers or None)
    assert sink.run(forged, failed_envelope(attack["id"].format(victim="victim"), headers=headers or None)) == []
    keys = sink.keys()
    assert len(keys) == 3 and all(KEY.fullmatch(key) for key in keys), keys
    assert sink.object(victim_key)[0] == [victim]
    assert sink.line("victim") == victim


@pytest.mark.parametrize("phase", ["canceled", "paused", "pending"])
def test_p_sink_4_other_phases_are_acked_without_effects(sink: Sink, phase: str) -> None:
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope(phase=phase)) == []
    assert sink.keys() == []
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]
    assert sink.drain("x-sump") == []


def test_p_sink_5_checkpoint_failure_fails_the_records(mesh: Any) -> None:
    sink = Sink(mesh, bucket="asya-demo-no-such-bucket")
    sink.store.create_task(task_id="t1", actor="normalize")
    sink.store.create_task(task_id="t2", actor="normalize")
    assert sink.run(envelope("t1"), envelope("t2")) == [0, 1]
    # nothing after the failed checkpoint happened
    assert sink.store.get_task("t1")["status"] == "pending"  # type: ignore[index]
    assert sink.drain("x-sump") == []


def test_p_sink_7_redelivery_lands_in_a_new_object_and_never_overwrites(sink: Sink) -> None:
    """P-SINK-7, P-CKPT-1: the redelivered record is a line of a second object; the first object, which the task
    points at, is unchanged; the first terminal write wins (one status event) and ``terminal_by`` stays the first
    record's."""
    sink.store.create_task(task_id="t1", actor="normalize")
    env = failed_envelope()
    assert sink.run(env) == []
    first_key, writer = sink.keys()[0], sink.message_ids[0]
    assert sink.run(env) == []
    keys = sink.keys()
    assert len(keys) == 2 and first_key in keys
    assert all(sink.object(key)[0] == [env] for key in keys)
    view = sink.store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["last_event_id"] == 2
    assert (view["checkpoint_key"], view["checkpoint_line"]) == (first_key, 1)
    assert sink.task_item("t1")["terminal_by"] == {"S": writer}
    forwards = sink.drain("x-sump")
    assert len(forwards) == 2  # x-sump may receive a duplicate, each naming its own line
    assert sorted(f["headers"]["x-asya-checkpointed"]["key"] for f in forwards) == sorted(keys)


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
    # the error names the child, and the task reads the actor the child failed at (P-FAN-8 (R3))
    assert view["status"] == "failed" and view["error"] == "child child-1: model returned no text"
    assert view["current_actor"] == view["failed_actor"] == partial["status"]["actor"]
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
    [forwarded] = sink.drain("x-sump")
    assert forwarded["headers"]["x-asya-checkpointed"]["line"] == 1
    assert {**forwarded, "headers": env["headers"]} == env


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
    [key] = sink.keys()
    assert sink.object(key)[0] == [canceled, late]
    view = sink.store.get_task("t-canceled")
    assert view is not None
    assert view["status"] == "canceled", "the first terminal write wins (P-STAT-2)"
    assert (view["checkpoint_key"], view["checkpoint_line"]) == (key, 1), "a stale write attaches its checkpoint"
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
    assert out["headers"] == {"x-asya-flow": "f", "x-asya-hops": 1}  # what parsed is kept (P-HDR-1), one send more
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
    assert "NoSuchBucket" in failed.__dict__["error"]
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


def test_p_time_6_unstarted_records_get_no_line_and_come_back_at_once(sink: Sink) -> None:
    """P-TIME-6 for crew (budget 0): with less than the 5 s margin left only the first record starts; the others fail
    unstarted, are left out of the checkpoint object and made visible again at once, and their tasks are untouched."""
    for task_id in ("t1", "t2", "t3"):
        sink.store.create_task(task_id=task_id, actor="normalize")
    assert sink.run(envelope("t1"), envelope("t2"), envelope("t3"), context=Context(remaining_ms=4_000)) == [1, 2]
    [key] = sink.keys()
    assert [line["id"] for line in sink.object(key)[0]] == ["t1"]
    assert [sink.store.get_task(t)["status"] for t in ("t1", "t2", "t3")] == ["succeeded", "pending", "pending"]  # type: ignore[index]
    back = sink.drain("x-sink")  # visibility 0: receivable again without waiting
    assert sorted(env["id"] for env in back) == ["t2", "t3"]


def test_p_ack_4_a_failed_checkpoint_comes_back_after_the_backoff_not_the_queue_visibility(
    mesh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P-ACK-4 (found by ``make chaos``): an x-sink record whose checkpoint PUT failed comes back after
    ``5 * 2^(n-1)`` s, not after the crew queue's visibility timeout (6 x its 310 s Lambda: 31 minutes, past most
    task deadlines, so one S3 blip timed out tasks whose results were ready)."""
    sqs_clock = SqsClock().install(monkeypatch)
    sink = Sink(mesh, bucket="asya-demo-no-such-bucket")
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope("t1")) == [0]
    url = mesh.resources.queue_urls["x-sink"]
    sqs_clock.advance(4)
    assert sink.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
    sqs_clock.advance(2)
    assert len(sink.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", [])) == 1


def test_p_trace_4_x_sink_record_keys_end_with_the_record(mesh: Any) -> None:
    """A crew record's ``correlation_id``, ``attempt`` and ``phase`` are gone once its record ended: a line the
    runtime's logger writes after the batch carries ``actor`` only."""
    stream = io.StringIO()
    logger = Logger(service=f"test-x-sink-{uuid.uuid4()}", logger_handler=logging.StreamHandler(stream))
    sink = Sink(mesh, logger=logger)
    sink.store.create_task(task_id="t-scoped", actor="normalize")
    assert sink.run(envelope("t-scoped")) == []
    logger.warning("batch-level line")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [line] = [line for line in lines if line["message"] == "batch-level line"]
    assert line["actor"] == "x-sink"
    assert not {"correlation_id", "attempt", "phase"} & set(line), line
