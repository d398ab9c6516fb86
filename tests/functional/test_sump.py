"""x-sump against moto (PROTOCOL 12.2 P-SUMP-1..5, P-CKPT-*, P-STAT-2, P-ACK-2)."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from asya.config import ActorConfig
from asya.store import TaskStore
from asya_crew.sump import SumpRuntime
from tests.functional.actors import actor_env, deliver, queue_arn

pytestmark = pytest.mark.functional

NOW = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
LOGGER = "test.x-sump"
KEY = re.compile(
    r"failed/[0-9a-f]/\d{4}-\d{2}-\d{2}/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl"
)


class Sump:
    def __init__(self, mesh: Any, *, bucket: str | None = None, table: str | None = None, logger: Any = None) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.s3 = mesh.aws.s3
        self.bucket = mesh.resources.bucket
        extra = {"ASYA_BUCKET": bucket or self.bucket, "ASYA_TABLE": table or mesh.resources.table}
        config = ActorConfig.from_env(actor_env(mesh, "x-sump", **extra))
        self.runtime = SumpRuntime(
            config,
            sqs=self.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=self.s3,
            clock=lambda: NOW,
            logger=logger or logging.getLogger(LOGGER),
        )

    def run(self, *bodies: str | dict[str, Any]) -> tuple[list[int], list[str]]:
        """One batch through the x-sump queue: (failed record indexes, message ids)."""
        url = self.mesh.resources.queue_urls["x-sump"]
        event = deliver(self.sqs, url, bodies, arn=queue_arn(self.mesh, "x-sump"))
        response = self.runtime.handle(event, None)
        ids = [r["messageId"] for r in event["Records"]]
        return [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]], ids

    def keys(self) -> list[str]:
        return [o["Key"] for o in self.s3.list_objects_v2(Bucket=self.bucket).get("Contents", [])]

    def read(self, key: str) -> list[Any]:
        """The lines of the JSON Lines object ``key``, parsed."""
        obj = self.s3.get_object(Bucket=self.bucket, Key=key)
        assert obj["ContentType"] == "application/x-ndjson"
        return [json.loads(line) for line in obj["Body"].read().decode("utf-8").splitlines()]

    def checkpoint(self) -> list[Any]:
        """The lines of the only checkpoint object."""
        [key] = self.keys()
        assert KEY.fullmatch(key), key
        return self.read(key)


@pytest.fixture
def sump(mesh: Any) -> Sump:
    return Sump(mesh)


def metrics(out: str, name: str = "FailedEnvelopes") -> list[dict[str, Any]]:
    """The EMF lines of metric ``name`` printed to ``out``."""
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [
        line for line in lines if "_aws" in line and line["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == name
    ]


def failed(env_id: str = "t1", *, reason: str = "RouteMismatch", payload: Any = None) -> dict[str, Any]:
    return {
        "id": env_id,
        "route": {"prev": ["normalize"], "curr": "analyze", "next": []},
        "headers": {"x-asya-flow": "text-pipeline"},
        "status": {
            "phase": "failed",
            "reason": reason,
            "actor": "analyze",
            "attempt": 1,
            "max_attempts": 1,
            "created_at": "2026-03-01T10:00:00Z",
            "updated_at": "2026-03-01T10:00:02Z",
            "error": {"message": "route mismatch", "type": reason},
        },
        "payload": {"error": "RouteMismatch: route mismatch"} if payload is None else payload,
    }


def test_p_sump_4_checkpoints_failed_envelope_and_p_sump_2_metric(
    sump: Sump, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    env = failed()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    phase, _, day, _ = sump.keys()[0].split("/")
    assert (phase, day) == ("failed", "2026-03-01")
    assert sump.checkpoint() == [env]
    [metric] = metrics(capsys.readouterr().out)
    definition = metric["_aws"]["CloudWatchMetrics"][0]
    assert definition["Namespace"] == "Asya"
    assert definition["Metrics"][0]["Name"] == "FailedEnvelopes"
    assert sorted(definition["Dimensions"][0]) == ["Actor", "Namespace", "Reason"]
    assert (metric["Namespace"], metric["Actor"], metric["Reason"], metric["FailedEnvelopes"]) == (
        "demo",
        "analyze",
        "RouteMismatch",
        [1.0],
    )
    # P-SUMP-3: the whole envelope, at ERROR for phase failed; issue 20: an infrastructure error says so
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert (record.levelno, record.getMessage()) == (logging.ERROR, "infrastructure error")
    assert record.envelope == env  # type: ignore[attr-defined]
    assert (record.reason, record.error_type) == ("RouteMismatch", "RouteMismatch")  # type: ignore[attr-defined]


def test_p_sump_4_a_failure_forwarded_by_x_sink_is_not_checkpointed_again_and_logged_as_task_failed(
    sump: Sump, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """P-SUMP-4, P-SINK-5 (e): the ``x-asya-checkpointed`` header says x-sink wrote the line; issue 20 point 7: an
    ordinary handler error is ``task failed`` at WARNING with its error type, and the metric's ``Reason`` is the
    handler's (not an infrastructure reason)."""
    env = failed(reason="PolicyExhausted")
    env["status"]["error"] = {"message": "boom", "type": "myapp.errors.Boom"}
    env["headers"]["x-asya-checkpointed"] = {"key": "failed/2026-03-01/0f0e0d0c.jsonl", "line": 3}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    assert sump.keys() == []
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "task failed")
    assert record.error_type == "myapp.errors.Boom"  # type: ignore[attr-defined]
    assert record.checkpointed == {"key": "failed/2026-03-01/0f0e0d0c.jsonl", "line": 3}  # type: ignore[attr-defined]
    [metric] = metrics(capsys.readouterr().out)
    assert (metric["Actor"], metric["Reason"]) == ("analyze", "PolicyExhausted")


def test_p_res_10_a_partial_failure_notice_is_logged_and_counted_without_a_checkpoint(
    sump: Sump, mesh: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """P-RES-10, P-SUMP-4: a ``PartialFailure`` notice is not the task's outcome: no checkpoint, no attach."""
    store = TaskStore(table=mesh.resources.table, bucket=sump.bucket, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="prep")
    env = failed(reason="PartialFailure")
    env["status"]["error"] = {"message": "boom", "type": "ValueError", "frames_sent": 2}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    assert sump.keys() == []
    assert "checkpoint_key" not in store.get_task("t1")  # type: ignore[operator]
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "partial failure")
    [metric] = metrics(capsys.readouterr().out)
    assert metric["Reason"] == "PartialFailure"


def test_p_stat_2_x_sump_attaches_its_checkpoint_to_the_task_the_layer_failed(sump: Sump, mesh: Any) -> None:
    """Issue 18 defect 9: a handler timeout is failed by the layer (P-ERR-6, no checkpoint) and checkpointed by x-sump,
    which attaches key and line to the task, whether the layer's final write came first or not; the status stays
    the layer's; a task that has a checkpoint keeps it; an unknown id and a child are left alone."""
    store = TaskStore(table=mesh.resources.table, bucket=sump.bucket, dynamodb=mesh.aws.dynamodb)
    for task_id in ("t-final", "t-running", "t-kept"):
        store.create_task(task_id=task_id, actor="prep")
    store.report_final("t-final", status="failed", error="handler timed out", failed_actor="analyze")
    store.report_final(
        "t-kept", status="failed", error="x", checkpoint_key="failed/2026-03-01/k.jsonl", checkpoint_line=7
    )
    events_before = store.get_task("t-final")["last_event_id"]  # type: ignore[index]
    batch = [failed(task_id, reason="HandlerTimeout") for task_id in ("t-final", "t-running", "t-kept", "t-unknown")]
    child = failed("c1", reason="HandlerTimeout")
    child["parent_id"] = "t-final"
    assert sump.run(*batch, child)[0] == []
    [key] = sump.keys()
    assert sump.read(key) == [*batch, child]
    final = store.get_task("t-final")
    assert final is not None
    assert (final["status"], final["checkpoint_key"], final["checkpoint_line"]) == ("failed", key, 1)
    assert final["checkpoint_uri"] == f"s3://{sump.bucket}/{key}"
    assert final["last_event_id"] == events_before, "an attach is no status event"
    running = store.get_task("t-running")
    assert running is not None
    assert (running["status"], running["checkpoint_key"], running["checkpoint_line"]) == ("pending", key, 2)
    # the layer's final write after the attach keeps the checkpoint (P-STAT-2: x-sump may run first)
    store.report_final("t-running", status="failed", error="handler timed out", failed_actor="analyze")
    running = store.get_task("t-running")
    assert running is not None
    assert (running["status"], running["checkpoint_key"], running["checkpoint_line"]) == ("failed", key, 2)
    kept = store.get_task("t-kept")
    assert kept is not None and (kept["checkpoint_key"], kept["checkpoint_line"]) == ("failed/2026-03-01/k.jsonl", 7)
    assert store.get_task("t-unknown") is None


def test_p_sump_4_a_failed_put_fails_every_record_it_holds(mesh: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Both records are lines of the one object whose PUT fails; a forwarded failure (no checkpoint) goes on."""
    sump = Sump(mesh, bucket="asya-demo-no-such-bucket")
    forwarded = failed("t3", reason="PolicyExhausted")
    forwarded["headers"]["x-asya-checkpointed"] = {"key": "failed/2026-03-01/k.jsonl", "line": 1}
    assert sump.run(failed("t1"), failed("t2"), forwarded)[0] == [0, 1]
    out = capsys.readouterr().out
    [metric] = metrics(out)  # the failed ones are counted once, when their retry succeeds
    assert metric["Reason"] == "PolicyExhausted"
    # the records handed back to SQS, for the mesh-level FailedRecords alarm (not Lambda errors)
    [handed_back] = metrics(out, "FailedRecords")
    assert handed_back["Namespace"] == "demo" and handed_back["FailedRecords"] in (2.0, [2.0])


def test_p_ckpt_1_a_redelivered_record_lands_in_a_new_object(sump: Sump) -> None:
    env = failed()
    assert sump.run(env)[0] == []
    [first] = sump.keys()
    assert sump.run(env)[0] == []
    keys = sump.keys()
    assert len(keys) == 2 and first in keys
    assert [sump.read(key) for key in keys] == [[env], [env]]


def test_p_sump_5_unparseable_body_is_stored_raw_under_unparsed_by_message_id(
    sump: Sump, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """P-SUMP-5 (R2): ``unparsed/{today}/sqs-{messageId}.txt`` holds the body as it came, outside the JSON Lines
    prefixes; a redelivery keeps the first copy; a parseable envelope of the same batch is still checkpointed."""
    body = '{"id": "t1", "route": 5} \u2028 not an envelope'
    with caplog.at_level(logging.INFO, logger=LOGGER):
        failures, ids = sump.run(body, failed("t2"))
    assert failures == []
    key = f"unparsed/2026-03-02/sqs-{ids[0]}.txt"
    stored = sump.keys()
    assert key in stored and len(stored) == 2
    obj = sump.s3.get_object(Bucket=sump.bucket, Key=key)
    assert obj["Body"].read().decode("utf-8") == body
    assert obj["ContentType"] == "text/plain; charset=utf-8"
    [line] = [sump.read(k) for k in stored if k.startswith("failed/")]
    assert line == [failed("t2")]
    [record] = [r for r in caplog.records if r.name == LOGGER and r.getMessage() == "body is not a valid envelope"]
    assert record.levelno == logging.ERROR and record.raw_body == body  # type: ignore[attr-defined]
    [metric, _] = metrics(capsys.readouterr().out)
    assert (metric["Actor"], metric["Reason"]) == ("unknown", "ParseError")


def test_p_sump_3_non_failed_phase_logged_at_info_without_checkpoint(
    sump: Sump, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    env = failed()
    env["status"] = {"phase": "succeeded"}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    assert sump.keys() == []
    assert [r.levelno for r in caplog.records if r.name == LOGGER] == [logging.INFO]
    [metric] = metrics(capsys.readouterr().out)
    assert (metric["Actor"], metric["Reason"]) == ("unknown", "None")


def test_p_sump_3_large_payload_logged_as_marker(sump: Sump, caplog: pytest.LogCaptureFixture) -> None:
    big = "z" * (210 * 1024)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(failed(payload=big))[0] == []
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.envelope["payload"] == {"__truncated__": True, "size_bytes": len(big) + 2}  # type: ignore[attr-defined]
    # the checkpoint keeps the whole payload
    assert sump.checkpoint()[0]["payload"] == big


def test_p_sump_1_never_writes_status_or_sends(sump: Sump, mesh: Any) -> None:
    """P-SUMP-1 (R2): its only write to the table attaches its checkpoint (two attributes of the task item)."""
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="prep")  # a live task: a status write would land (P-STAT-4)
    before = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    assert sump.run(failed())[0] == []
    after = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    [key] = sump.keys()
    attached = {"checkpoint_key": {"S": key}, "checkpoint_line": {"N": "1"}}
    assert after == [{**item, **attached} if item["sk"] == {"S": "TASK"} else item for item in before]
    assert store.get_task("t1")["status"] == "pending"
    for url in mesh.resources.queue_urls.values():
        attrs = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"


def test_p_trace_4_x_sump_log_lines_carry_actor_attempt_phase_and_correlation_id(mesh: Any) -> None:
    stream = io.StringIO()
    logger = Logger(service=f"test-x-sump-{uuid.uuid4()}", logger_handler=logging.StreamHandler(stream))
    sump = Sump(mesh, logger=logger)
    env = failed("t-logs")
    env["status"]["attempt"] = 3
    assert sump.run(env)[0] == []
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [reached] = [line for line in lines if line["message"] == "infrastructure error"]
    assert (reached["actor"], reached["correlation_id"], reached["attempt"], reached["phase"]) == (
        "x-sump",
        "t-logs",
        3,
        "failed",
    )


def test_p_stat_11_p_proc_3_no_preflight_or_sla_check_at_x_sump(sump: Sump, mesh: Any) -> None:
    """x-sump runs no route check, pre-flight or SLA check (P-PROC-3, P-STAT-11, P-TIME-4): a failed envelope for a
    canceled task, routed to ``analyze`` and an hour past its ``deadline_at``, is checkpointed as it came and acked;
    nothing is sent (no canceled or Timeout envelope to x-sink) and the task is untouched."""
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="prep")
    assert store.cancel("t1") == "canceled"
    env = failed()
    env["status"]["deadline_at"] = "2026-03-02T07:00:00Z"  # NOW - 1 h
    assert sump.run(env)[0] == []
    assert sump.checkpoint() == [env]
    assert store.get_task("t1")["status"] == "canceled"
    for actor in ("x-sink", "x-sump", "analyze"):
        url = mesh.resources.queue_urls[actor]
        attrs = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0", actor


def test_p_sump_4_a_failed_hook_copy_is_checkpointed_but_not_attached(
    sump: Sump, mesh: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook's failure is not the task's outcome (P-SINK-2, P-STAT-13): x-sump keeps its line (x-sink wrote none)
    and logs ``sink hook failed`` at WARNING, and the task keeps the checkpoint it has (or none)."""
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="prep")
    env = failed(reason="RuntimeError")
    env["headers"]["x-asya-sink-hook"] = {"hook": "notify", "phase": "succeeded"}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    assert sump.checkpoint() == [env]
    assert "checkpoint_key" not in store.get_task("t1")  # type: ignore[operator]
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "sink hook failed")
    assert record.hook == {"hook": "notify", "phase": "succeeded"}  # type: ignore[attr-defined]


def test_p_stat_2_an_attach_that_cannot_be_written_fails_the_record(
    mesh: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attach is on the durability path (P-SUMP-4): a table error fails the record so SQS delivers it again
    (its line is then written again, in another object), and nothing is counted yet."""
    sump = Sump(mesh, table="asya-demo-no-such-table")
    assert sump.run(failed("t1"))[0] == [0]
    assert len(sump.keys()) == 1, "the line was written before the attach"
    assert metrics(capsys.readouterr().out) == []


def test_p_sink_3_a_failed_fan_in_slice_forwarded_by_x_sink_is_checkpointed_and_logged_as_task_failed(
    sump: Sump, caplog: pytest.LogCaptureFixture
) -> None:
    """x-sink writes no checkpoint for a failed fan-in slice (P-SINK-3), so x-sump keeps its line; it is a handler's
    failure forwarded by x-sink, so the log line is ``task failed`` at WARNING (issue 20 point 7)."""
    env = failed("child-1", reason="PolicyExhausted")
    env["parent_id"] = "origin-1"
    env["headers"]["x-asya-fan-in"] = {"origin_id": "origin-1", "slice_index": 1, "slice_count": 3}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert sump.run(env)[0] == []
    assert sump.checkpoint() == [env]
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "task failed")
