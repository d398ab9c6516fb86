"""The deadline backstop's sweep of long deadlines, its Lambda entry point and the local loop, against moto (GATEWAY
section 14: GW-BACK-1..6; PROTOCOL P-TIME-9, P-STAT-1, P-STAT-2). Timers: ``test_deadline_timers.py``.

Tasks are created through the task store, the sweep reads the store's ``long_deadline_pages`` (the real index) and
writes through the store's conditional transition; races and faults are injected with botocore event hooks on real
clients.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya.config import ActorConfig
from asya.store import StatusUpdate, TaskStore
from asya.timeutil import format_ts
from asya_crew.sink import SinkRuntime
from asya_gateway import backstop as backstop_module
from asya_gateway.backstop import Backstop, BackstopError, BackstopEventError, emit_timed_out_metric, lambda_handler
from asya_gateway.timers import DeadlineTimers, Timer
from asya_local.lambda_event import scheduled_event, sqs_event
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parent.parent.parent

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
#: A long deadline (more than LONG_DEADLINE_SECONDS after creation): the sweep's, not a timer's (GW-BACK-1).
DEADLINE = "2026-03-01T11:00:00Z"
#: Past DEADLINE.
OVERDUE_MINUTES = 61


class Metrics:
    """Records the per-sweep metric calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, namespace: str, count: int) -> None:
        self.calls.append((namespace, count))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(mesh: Any, clock: ManualClock) -> TaskStore:
    return TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, clock=clock)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


def _backstop(store: TaskStore, metrics: Metrics | None, **kwargs: Any) -> Backstop:
    timers = DeadlineTimers(namespace="demo")  # a sweep sends no timer: no client is ever created
    return Backstop(store, namespace="demo", timers=timers, metric=metrics, **kwargs)


def _status(store: TaskStore, task_id: str) -> str:
    view = store.get_task(task_id, enforce_deadline=False)
    assert view is not None
    return str(view["status"])


def _due(store: TaskStore) -> list[dict[str, str]]:
    return [entry for page in store.long_deadline_pages() for entry in page]


def _running(store: TaskStore, task_id: str) -> None:
    assert store.report_running(
        task_id,
        step="processing",
        actor="normalize",
        route_prev=[],
        route_curr="normalize",
        route_next=["analyze"],
    )


def test_gw_back_1_gw_back_2_sweep_fails_long_expired_pending_and_running_tasks_only(
    store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    store.create_task(task_id="expired-pending", actor="normalize", deadline_at=DEADLINE)
    store.create_task(task_id="expired-running", actor="normalize", deadline_at=DEADLINE)
    _running(store, "expired-running")
    store.create_task(task_id="later", actor="normalize", deadline_at="2026-03-01T12:00:00Z")
    store.create_task(task_id="no-deadline", actor="normalize")
    store.create_task(task_id="done", actor="normalize", deadline_at=DEADLINE)
    assert store.report_final("done", status="succeeded", result={"ok": True})
    store.create_task(task_id="paused", actor="normalize", deadline_at=DEADLINE)
    assert store.apply_status("paused", StatusUpdate(status="paused", pause_metadata={"prompt": "p"}))
    store.create_task(task_id="short", actor="normalize", deadline_at="2026-03-01T10:15:00Z")
    clock.advance(minutes=OVERDUE_MINUTES)

    result = _backstop(store, metrics).sweep()

    assert result.to_dict() == {"due": 2, "timed_out": 2, "skipped": 0, "errors": 0, "complete": True}
    for task_id in ("expired-pending", "expired-running"):
        view = store.get_task(task_id, enforce_deadline=False)
        assert view is not None
        assert (view["status"], view["error"], view["message"]) == ("failed", "task timed out", "task timed out")
        assert view["data"]["status"] == "failed" and view["data"]["error"] == "task timed out"
    # GW-BACK-5: unexpired, deadline-less, terminal and paused tasks are untouched
    assert _status(store, "later") == "pending"
    assert _status(store, "no-deadline") == "pending"
    assert _status(store, "done") == "succeeded"
    assert _status(store, "paused") == "paused"
    assert _status(store, "short") == "pending"  # a deadline within 900 s is its timer's (test_deadline_timers)
    assert _due(store) == []  # terminal tasks leave the index; a short deadline never enters it
    assert metrics.calls == [("demo", 2)]


def test_gw_back_6_metric_is_emitted_on_every_sweep(store: TaskStore, metrics: Metrics) -> None:
    assert _backstop(store, metrics).sweep().timed_out == 0
    assert metrics.calls == [("demo", 0)]


def test_gw_back_6_emf_metric_line(capsys: pytest.CaptureFixture[str]) -> None:
    emit_timed_out_metric("demo", 3)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["TasksTimedOut"] in (3, [3])  # powertools prints a one-element list
    assert line["Namespace"] == "demo"
    [directive] = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Asya"
    assert directive["Dimensions"] == [["Namespace"]]
    assert directive["Metrics"][0]["Name"] == "TasksTimedOut"


def test_gw_back_4_p_stat_2_late_sink_success_after_the_backstop_keeps_the_task_failed(
    mesh: Any, store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", deadline_at=DEADLINE)
    _running(store, "t1")
    clock.advance(minutes=OVERDUE_MINUTES)
    assert _backstop(store, metrics).sweep().timed_out == 1

    # the last actor finishes late: its envelope reaches the real x-sink runtime
    envelope = {
        "id": "t1",
        "route": {"prev": ["normalize", "analyze"], "curr": "summarize", "next": []},
        "headers": {"x-asya-flow": "text-pipeline"},
        "status": {
            "phase": "succeeded",
            "reason": "Completed",
            "actor": "summarize",
            "attempt": 1,
            "max_attempts": 1,
            "created_at": "2026-03-01T10:00:00Z",
            "updated_at": "2026-03-01T10:01:30Z",
            "deadline_at": DEADLINE,
        },
        "payload": {"summary": "late"},
    }
    url = mesh.resources.queue_urls["x-sink"]
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(envelope))
    messages = mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"])["Messages"]
    config = ActorConfig.from_env(
        {
            "ASYA_NAMESPACE": "demo",
            "ASYA_ACTOR": "x-sink",
            "ASYA_TABLE": mesh.resources.table,
            "ASYA_BUCKET": mesh.resources.bucket,
        }
    )
    sink = SinkRuntime(
        config,
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=clock,
        logger=logging.getLogger("test.x-sink"),
    )
    event = sqs_event(messages, queue_arn="arn:aws:sqs:us-east-1:123456789012:asya-demo-x-sink", region="us-east-1")
    assert sink.handle(event, None) == {"batchItemFailures": []}

    view = store.get_task("t1")
    assert view is not None
    assert view["status"] == "failed" and view["error"] == "task timed out"
    assert "result" not in view or view["result"] is None
    # x-sink still attaches its checkpoint (P-STAT-2), with its line (P-CKPT-4)
    assert view["checkpoint_key"].split("/")[::2] == ["succeeded", "2026-03-01"] and view["checkpoint_line"] == 1


def test_gw_back_2_task_that_finished_after_the_index_read_is_left_alone(
    aws: Any, mesh: Any, store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at=DEADLINE)
    clock.advance(minutes=OVERDUE_MINUTES)
    sink_store = TaskStore(table=mesh.resources.table, dynamodb=aws.session.client("dynamodb"), clock=clock)

    def finish_once(parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("Items") and _status(sink_store, "t1") == "pending":
            assert sink_store.report_final("t1", status="succeeded", result=1)

    # the race: x-sink's final write lands between the sweep's index read and its conditional write
    store.dynamodb.meta.events.register("after-call.dynamodb.Query", finish_once)
    result = _backstop(store, metrics).sweep()
    assert (result.due, result.timed_out, result.skipped) == (1, 0, 1)
    assert _status(store, "t1") == "succeeded"
    assert metrics.calls == [("demo", 0)]


def test_gw_back_2_sweep_follows_index_pages(mesh: Any, store: TaskStore, clock: ManualClock, metrics: Metrics) -> None:
    ids = [f"t{i:02d}" for i in range(40)]
    for task_id in ids:
        store.create_task(task_id=task_id, actor="normalize", deadline_at=DEADLINE)
    clock.advance(minutes=OVERDUE_MINUTES)
    continued: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        if params.get("IndexName") == "long_deadlines" and "ExclusiveStartKey" in params:
            continued.append(params)

    store.dynamodb.meta.events.register("provide-client-params.dynamodb.Query", record)
    result = _backstop(store, metrics, page_size=2).sweep()
    assert (result.due, result.timed_out, result.complete) == (40, 40, True)
    assert continued, "40 entries over 16 shards with 2 per page need continuation pages"
    assert {_status(store, task_id) for task_id in ids} == {"failed"}


def test_gw_back_2_one_task_error_does_not_stop_the_sweep(
    store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    for task_id in ("a", "b", "c"):
        store.create_task(task_id=task_id, actor="normalize", deadline_at=DEADLINE)
    clock.advance(minutes=OVERDUE_MINUTES)

    def throttle_b(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("pk", {}).get("S") == "TASK#b":
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"}}, "UpdateItem"
            )

    store.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", throttle_b)
    result = _backstop(store, metrics).sweep()
    assert (result.due, result.timed_out, result.errors) == (3, 2, 1)
    assert (_status(store, "a"), _status(store, "b"), _status(store, "c")) == ("failed", "pending", "failed")
    # the entry stays in the index: the next sweep retries it
    store.dynamodb.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", throttle_b)
    assert _backstop(store, metrics).sweep().timed_out == 1
    assert _status(store, "b") == "failed"


def test_gw_back_2_sweep_stops_when_the_time_budget_runs_out(
    store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    for i in range(5):
        store.create_task(task_id=f"t{i}", actor="normalize", deadline_at=DEADLINE)
    clock.advance(minutes=OVERDUE_MINUTES)
    budget = iter([30.0, 30.0, 1.0])

    result = _backstop(store, metrics).sweep(time_left=lambda: next(budget))
    assert (result.due, result.timed_out, result.complete) == (2, 2, False)
    assert len(_due(store)) == 3
    assert _backstop(store, metrics).sweep().timed_out == 3


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 50_000


def _scheduled() -> dict[str, Any]:
    rule = "arn:aws:events:us-east-1:123456789012:rule/backstop"
    return scheduled_event(rule, now=datetime.now(UTC), region="us-east-1", account_id="123456789012")


@pytest.fixture
def handler_env(mesh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lambda's environment (the gateway's: manifest, table, account), a fresh module-level backstop, and the
    process's logging restored afterwards (the handler configures the ``asya_gateway`` logger the way the Lambda
    needs it)."""
    monkeypatch.setenv("ASYA_MANIFEST", str(REPO / "asya.yaml"))
    monkeypatch.setenv("ASYA_TABLE", mesh.resources.table)
    monkeypatch.setenv("ASYA_ACCOUNT_ID", "123456789012")
    monkeypatch.setattr(backstop_module, "_BACKSTOP", None)
    gateway_logger = logging.getLogger("asya_gateway")
    monkeypatch.setattr(gateway_logger, "handlers", list(gateway_logger.handlers))
    monkeypatch.setattr(gateway_logger, "propagate", gateway_logger.propagate)
    monkeypatch.setattr(gateway_logger, "level", gateway_logger.level)


@pytest.fixture
def past_store(mesh: Any) -> TaskStore:
    """A store whose clock stands two hours back: the tasks it creates carry long deadlines already past."""
    return TaskStore(
        table=mesh.resources.table,
        dynamodb=mesh.aws.dynamodb,
        clock=ManualClock(datetime.now(UTC) - timedelta(hours=2)),
    )


def _past() -> str:
    return format_ts(datetime.now(UTC) - timedelta(minutes=1))


def test_gw_back_1_lambda_handler_sweeps_on_the_schedule_with_the_environment_config(
    past_store: TaskStore, handler_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    past_store.create_task(task_id="t1", actor="normalize", deadline_at=_past())

    summary = lambda_handler(_scheduled(), _Context())

    assert summary == {"due": 1, "timed_out": 1, "skipped": 0, "errors": 0, "complete": True}
    assert _status(past_store, "t1") == "failed"
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["TasksTimedOut"] for line in lines if "_aws" in line] in ([1], [[1]])


def test_gw_back_1_lambda_handler_takes_timer_batches(
    mesh: Any, past_store: TaskStore, handler_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same entry point answers an SQS event from the timer queue with a partial batch response."""
    deadline_at = _past()
    past_store.create_task(task_id="t1", actor="normalize", deadline_at=deadline_at)
    url = mesh.resources.queue_urls["x-deadline"]
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody=Timer("t1", deadline_at).to_body())
    mesh.aws.sqs.send_message(QueueUrl=url, MessageBody="not a timer")
    messages = mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    bad = next(m["MessageId"] for m in messages if m["Body"] == "not a timer")
    event = sqs_event(messages, queue_arn="arn:aws:sqs:us-east-1:123456789012:asya-demo-x-deadline", region="us-east-1")

    assert lambda_handler(event, _Context()) == {"batchItemFailures": [{"itemIdentifier": bad}]}
    assert _status(past_store, "t1") == "failed"
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["TasksTimedOut"] for line in lines if "_aws" in line] in ([1], [[1]])


@pytest.mark.parametrize(
    ("event", "shown"),
    [
        ({}, "an object with keys []"),
        ({"Records": []}, "an object with keys ['Records']"),
        ({"Records": [{"eventSource": "aws:s3"}]}, "an object with keys ['Records']"),
        ([1], "a list"),
    ],
)
def test_lambda_handler_rejects_other_events_naming_them(handler_env: None, event: Any, shown: str) -> None:
    with pytest.raises(BackstopEventError, match=f"takes an SQS event or a scheduled event, got {re.escape(shown)}"):
        lambda_handler(event, _Context())


def test_lambda_handler_raises_after_a_sweep_with_errors(past_store: TaskStore, handler_env: None) -> None:
    for task_id in ("a", "b"):
        past_store.create_task(task_id=task_id, actor="normalize", deadline_at=_past())
    lambda_handler(_scheduled(), _Context())  # builds the handler's store
    for task_id in ("c", "d"):
        past_store.create_task(task_id=task_id, actor="normalize", deadline_at=_past())
    handler_store = backstop_module._BACKSTOP.store  # type: ignore[union-attr]

    def throttle_c(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("pk", {}).get("S") == "TASK#c":
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "UpdateItem")

    handler_store.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", throttle_c)
    with pytest.raises(BackstopError, match="1 of 2 overdue tasks could not be timed out"):
        lambda_handler(_scheduled(), _Context())
    assert _status(past_store, "d") == "failed"
    assert _status(past_store, "c") == "pending"


# ---------------------------------------------------------------- local mode (GW-BACK-1: within 5 s)


def _wait_for(condition: Any, what: str, limit: float = 60.0) -> None:
    """Poll ``condition`` until true; fail naming ``what`` if it never is (a bound, not a timing assertion)."""
    import time

    stop = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < stop, f"gave up waiting for {what}"
        time.sleep(0.02)


def _loop(mesh: Any, store: TaskStore, clock: ManualClock, interval: float) -> Any:
    from asya_local.backstop_loop import BackstopLoop

    timers = DeadlineTimers(namespace="demo", sqs=mesh.aws.sqs, clock=clock)
    backstop = Backstop(store, namespace="demo", timers=timers, clock=clock, metric=None)
    return BackstopLoop(
        backstop, queue_url=mesh.resources.queue_urls["x-deadline"], sqs=mesh.aws.sqs, interval=interval
    )


def test_gw_back_1_local_loop_feeds_timers_and_sweeps_periodically_then_stops_cleanly(
    mesh: Any, store: TaskStore, clock: ManualClock
) -> None:
    store.create_task(task_id="long", actor="normalize", deadline_at=DEADLINE)
    short = format_ts(START + timedelta(seconds=30))
    store.create_task(task_id="short", actor="normalize", deadline_at=short)
    loop = _loop(mesh, store, clock, interval=0.05)
    loop.start()
    try:
        _wait_for(lambda: loop.sweeps >= 1, "a first sweep")
        assert _status(store, "long") == "pending"  # not due yet
        clock.advance(seconds=30)
        mesh.aws.sqs.send_message(  # the timer as it comes due (its delay is moto's real time)
            QueueUrl=mesh.resources.queue_urls["x-deadline"], MessageBody=Timer("short", short).to_body()
        )
        _wait_for(lambda: _status(store, "short") == "failed", "the timer to time out 'short'")
        assert _status(store, "long") == "pending"
        clock.advance(minutes=OVERDUE_MINUTES)
        _wait_for(lambda: _status(store, "long") == "failed", "the sweep to time out 'long'")
    finally:
        loop.stop(timeout=10)
    assert not loop.running
    assert loop.last_result is not None and loop.last_result["errors"] == 0
    assert (loop.timers.records, loop.timers.failures) == (1, 0)
    sweeps = loop.sweeps
    store.create_task(task_id="t2", actor="normalize", deadline_at=format_ts(clock() + timedelta(hours=1)))
    clock.advance(minutes=OVERDUE_MINUTES)
    assert _backstop(store, None).sweep().timed_out == 1  # t2 was due: nobody swept it
    assert loop.sweeps == sweeps


def test_local_loop_keeps_going_after_a_failing_sweep(
    mesh: Any, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    missing = TaskStore(table="asya-demo-missing", dynamodb=mesh.aws.dynamodb)
    loop = _loop(mesh, missing, clock, interval=0.02)
    with caplog.at_level(logging.ERROR, logger="asya_local.backstop_loop"):
        loop.start()
        try:
            _wait_for(lambda: loop.sweeps >= 2, "two sweeps")
        finally:
            loop.stop(timeout=10)
    assert loop.last_result is None
    assert "backstop sweep failed" in caplog.text and "ResourceNotFoundException" in caplog.text


def test_local_loop_rejects_a_bad_interval(mesh: Any, store: TaskStore, clock: ManualClock) -> None:
    from asya_local.exceptions import LocalModeError

    with pytest.raises(LocalModeError, match="backstop interval must be > 0 seconds, got 0"):
        _loop(mesh, store, clock, interval=0)


def test_an_empty_sweep_logs_nothing_at_info_and_a_sweep_that_timed_out_tasks_does(
    past_store: TaskStore, handler_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`asya dev` sweeps every few seconds: a sweep with nothing due stays at DEBUG (issue 28, item 7)."""

    def sweep_lines() -> list[str]:
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        return [line["message"] for line in lines if str(line.get("message", "")).startswith("backstop sweep")]

    assert lambda_handler(_scheduled(), _Context())["due"] == 0
    assert sweep_lines() == []
    past_store.create_task(task_id="t-info", actor="normalize", deadline_at=_past())
    assert lambda_handler(_scheduled(), _Context())["timed_out"] == 1
    assert [line.split(",")[0] for line in sweep_lines()] == ["backstop sweep: {'due': 1"]
