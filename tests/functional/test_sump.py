"""x-sump against moto (PROTOCOL 12.2 P-SUMP-1..5, P-CKPT-*, P-ACK-2)."""

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
from asya.store import TaskStore
from asya_crew.sump import SumpRuntime
from tests.functional.actors import actor_env, deliver, queue_arn

pytestmark = pytest.mark.functional

NOW = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
LOGGER = "test.x-sump"


class Sump:
    def __init__(self, mesh: Any, *, bucket: str | None = None, logger: Any = None) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.s3 = mesh.aws.s3
        self.bucket = mesh.resources.bucket
        config = ActorConfig.from_env(actor_env(mesh, "x-sump", ASYA_BUCKET=bucket or self.bucket))
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

    def read(self, key: str) -> Any:
        return json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())


@pytest.fixture
def sump(mesh: Any) -> Sump:
    return Sump(mesh)


def metrics(out: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [line for line in lines if "_aws" in line]


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
    assert sump.keys() == ["failed/2026-03-01/t1.json"]
    assert sump.read("failed/2026-03-01/t1.json") == env
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
    # P-SUMP-3: the whole envelope, at ERROR for phase failed
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.ERROR
    assert record.envelope == env  # type: ignore[attr-defined]


def test_p_sump_4_keeps_the_checkpoint_x_sink_wrote(sump: Sump) -> None:
    sump.s3.put_object(Bucket=sump.bucket, Key="failed/2026-03-01/t1.json", Body=b'{"by": "x-sink"}')
    assert sump.run(failed())[0] == []
    assert sump.read("failed/2026-03-01/t1.json") == {"by": "x-sink"}


def test_p_sump_4_other_write_failure_fails_the_record(mesh: Any, capsys: pytest.CaptureFixture[str]) -> None:
    sump = Sump(mesh, bucket="asya-demo-no-such-bucket")
    assert sump.run(failed("t1"), failed("t2"))[0] == [0, 1]
    assert metrics(capsys.readouterr().out) == []  # counted once, when the retry succeeds


def test_p_sump_5_unparseable_body_is_stored_by_message_id(sump: Sump, capsys: pytest.CaptureFixture[str]) -> None:
    failures, ids = sump.run("definitely not json")
    assert failures == []
    key = f"failed/2026-03-02/sqs-{ids[0]}.json"
    assert sump.keys() == [key]
    stored = sump.read(key)
    assert stored["raw_body"] == "definitely not json" and stored["message_id"] == ids[0]
    [metric] = metrics(capsys.readouterr().out)
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
    assert sump.read("failed/2026-03-01/t1.json")["payload"] == big


def test_p_sump_1_never_writes_status_or_sends(sump: Sump, mesh: Any) -> None:
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    store.create_task(task_id="t1", actor="prep")  # a live task: a status write would land (P-STAT-4)
    before = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    assert sump.run(failed())[0] == []
    after = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, ConsistentRead=True)["Items"]
    assert after == before
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
    [reached] = [line for line in lines if line["message"] == "envelope reached x-sump"]
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
    assert sump.keys() == ["failed/2026-03-01/t1.json"]
    assert sump.read("failed/2026-03-01/t1.json") == env
    assert store.get_task("t1")["status"] == "canceled"
    for actor in ("x-sink", "x-sump", "analyze"):
        url = mesh.resources.queue_urls[actor]
        attrs = mesh.aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0", actor
