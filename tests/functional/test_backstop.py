"""The deadline backstop against moto (GATEWAY section 14: GW-BACK-1..6; PROTOCOL P-TIME-9, P-STAT-1, P-STAT-2).

Tasks are created through the task store, the sweep reads the real ``long_deadlines`` index and writes through the
store's conditional transition; races and faults are injected with botocore event hooks on real clients. R2: only
deadlines more than ``LONG_DEADLINE_SECONDS`` (900 s) away when armed enter the index (shorter ones use SQS timers),
so the tasks here get deadlines 20 minutes after the clock's start.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya.config import ActorConfig
from asya.store import LONG_DEADLINE_SECONDS, StatusUpdate, TaskStore
from asya_crew.sink import SinkRuntime
from asya_gateway import backstop as backstop_module
from asya_gateway.backstop import Backstop, BackstopError, emit_timed_out_metric, lambda_handler
from asya_local.lambda_event import sqs_event
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parent.parent.parent

START = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
#: a long deadline (more than 900 s after START): it is armed in the ``long_deadlines`` index
DEADLINE = "2026-03-01T10:20:00Z"
LATER = "2026-03-01T10:40:00Z"
#: from START to a minute past DEADLINE
PAST_DEADLINE_MINUTES = 21


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


def _backstop(store: TaskStore, metrics: Metrics, **kwargs: Any) -> Backstop:
    return Backstop(store, namespace="demo", metric=metrics, **kwargs)


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


def test_gw_back_2_sweep_fails_expired_pending_and_running_tasks_only(
    store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    store.create_task(task_id="expired-pending", actor="normalize", deadline_at=DEADLINE)
    store.create_task(task_id="expired-running", actor="normalize", deadline_at=DEADLINE)
    _running(store, "expired-running")
    store.create_task(task_id="later", actor="normalize", deadline_at=LATER)
    store.create_task(task_id="no-deadline", actor="normalize")
    store.create_task(task_id="done", actor="normalize", deadline_at=DEADLINE)
    assert store.report_final("done", status="succeeded", result={"ok": True})
    store.create_task(task_id="paused", actor="normalize", deadline_at=DEADLINE)
    assert store.apply_status("paused", StatusUpdate(status="paused", pause_metadata={"prompt": "p"}))
    clock.advance(minutes=PAST_DEADLINE_MINUTES)

    result = _backstop(store, metrics).sweep()

    assert result.to_dict() == {"due": 2, "timed_out": 2, "skipped": 0, "errors": 0, "complete": True}
    for task_id in ("expired-pending", "expired-running"):
        view = store.get_task(task_id, enforce_deadline=False)
        assert view is not None
        assert (view["status"], view["error"], view["message"]) == ("failed", "task timed out", "task timed out")
        # R2: the timeout is one change of the task item (no event item): the status data says so at the next number
        assert view["data"]["status"] == "failed" and view["data"]["error"] == "task timed out"
        assert view["last_event_id"] == (3 if task_id == "expired-running" else 2)
    # GW-BACK-5: unexpired, deadline-less, terminal and paused tasks are untouched
    assert _status(store, "later") == "pending"
    assert _status(store, "no-deadline") == "pending"
    assert _status(store, "done") == "succeeded"
    assert _status(store, "paused") == "paused"
    clock.advance(minutes=30)  # "later" is due now too; terminal and paused tasks left the index
    assert [entry["id"] for entry in _due(store)] == ["later"]
    assert metrics.calls == [("demo", 2)]


def test_gw_back_1_only_deadlines_more_than_900_s_away_enter_the_long_deadlines_index(
    store: TaskStore, clock: ManualClock
) -> None:
    """R2: shorter deadlines are SQS timers, not index entries; "more than" 900 s, so exactly 900 s is a timer."""
    at = {
        "short": START + timedelta(minutes=10),
        "exactly-900-s": START + timedelta(seconds=LONG_DEADLINE_SECONDS),
        "long": START + timedelta(seconds=LONG_DEADLINE_SECONDS + 1),
    }
    for task_id, deadline in at.items():
        store.create_task(task_id=task_id, actor="normalize", deadline_at=deadline.strftime("%Y-%m-%dT%H:%M:%SZ"))
    clock.advance(minutes=PAST_DEADLINE_MINUTES)
    assert _due(store) == [{"id": "long", "deadline_at": "2026-03-01T10:15:01Z"}]


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
    clock.advance(minutes=PAST_DEADLINE_MINUTES)
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
    assert view["checkpoint_key"]  # x-sink still attaches its checkpoint (P-STAT-2)
    assert view["data"]["status"] == "failed" and view["data"]["error"] == "task timed out"


def test_gw_back_2_task_that_finished_after_the_index_read_is_left_alone(
    aws: Any, mesh: Any, store: TaskStore, clock: ManualClock, metrics: Metrics
) -> None:
    store.create_task(task_id="t1", actor="normalize", deadline_at=DEADLINE)
    clock.advance(minutes=PAST_DEADLINE_MINUTES)
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
    clock.advance(minutes=PAST_DEADLINE_MINUTES)
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
    clock.advance(minutes=PAST_DEADLINE_MINUTES)

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
    clock.advance(minutes=PAST_DEADLINE_MINUTES)
    budget = iter([30.0, 30.0, 1.0])

    result = _backstop(store, metrics).sweep(time_left=lambda: next(budget))
    assert (result.due, result.timed_out, result.complete) == (2, 2, False)
    assert len(_due(store)) == 3
    assert _backstop(store, metrics).sweep().timed_out == 3


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 50_000


@pytest.fixture
def handler_env(mesh: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Lambda's environment (the gateway's: manifest and table), a fresh module-level backstop, and the process's
    logging restored afterwards (the handler configures the ``asya_gateway`` logger the way the Lambda needs it)."""
    monkeypatch.setenv("ASYA_MANIFEST", str(REPO / "asya.yaml"))
    monkeypatch.setenv("ASYA_TABLE", mesh.resources.table)
    monkeypatch.setattr(backstop_module, "_BACKSTOP", None)
    gateway_logger = logging.getLogger("asya_gateway")
    monkeypatch.setattr(gateway_logger, "handlers", list(gateway_logger.handlers))
    monkeypatch.setattr(gateway_logger, "propagate", gateway_logger.propagate)
    monkeypatch.setattr(gateway_logger, "level", gateway_logger.level)


def _created_long_ago(mesh: Any) -> tuple[TaskStore, str]:
    """A store whose clock is 20 minutes behind the real one, and a deadline a minute before now: tasks it creates
    had a long deadline when armed (``long_deadlines``), and are due for the handler's real-clock sweep."""
    now = datetime.now(UTC)
    then = ManualClock(now - timedelta(seconds=LONG_DEADLINE_SECONDS + 300))
    store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=then)
    return store, (now - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_gw_back_1_lambda_handler_sweeps_with_the_environment_config(
    mesh: Any, handler_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    creator, past = _created_long_ago(mesh)
    creator.create_task(task_id="t1", actor="normalize", deadline_at=past)
    real_clock_store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)

    summary = lambda_handler({"source": "aws.events"}, _Context())

    assert summary == {"due": 1, "timed_out": 1, "skipped": 0, "errors": 0, "complete": True}
    assert _status(real_clock_store, "t1") == "failed"
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["TasksTimedOut"] for line in lines if "_aws" in line] in ([1], [[1]])


def test_lambda_handler_raises_after_a_sweep_with_errors(mesh: Any, handler_env: None) -> None:
    real_clock_store = TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb)
    creator, past = _created_long_ago(mesh)
    for task_id in ("a", "b"):
        creator.create_task(task_id=task_id, actor="normalize", deadline_at=past)
    lambda_handler({}, _Context())  # builds the handler's store
    for task_id in ("c", "d"):
        creator.create_task(task_id=task_id, actor="normalize", deadline_at=past)
    handler_store = backstop_module._BACKSTOP.store  # type: ignore[union-attr]

    def throttle_c(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("pk", {}).get("S") == "TASK#c":
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "UpdateItem")

    handler_store.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", throttle_c)
    with pytest.raises(BackstopError, match="1 of 2 overdue tasks could not be timed out"):
        lambda_handler({}, _Context())
    assert _status(real_clock_store, "d") == "failed"
    assert _status(real_clock_store, "c") == "pending"


# ---------------------------------------------------------------- local mode (GW-BACK-1: every few seconds)


def _wait_for(condition: Any, what: str, limit: float = 10.0) -> None:
    """Poll ``condition`` until true; fail naming ``what`` if it never is (a bound, not a timing assertion)."""
    import time

    stop = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < stop, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_gw_back_1_local_loop_sweeps_periodically_and_stops_cleanly(store: TaskStore, clock: ManualClock) -> None:
    from asya_local.backstop_loop import BackstopLoop

    store.create_task(task_id="t1", actor="normalize", deadline_at=DEADLINE)
    loop = BackstopLoop(Backstop(store, namespace="demo", metric=None), interval=0.05)
    loop.start()
    try:
        _wait_for(lambda: loop.sweeps >= 1, "a first sweep")
        assert _status(store, "t1") == "pending"  # not due yet
        clock.advance(minutes=PAST_DEADLINE_MINUTES)
        _wait_for(lambda: _status(store, "t1") == "failed", "the loop to time out t1")
    finally:
        loop.stop(timeout=10)
    assert not loop.running
    assert loop.last_result is not None and loop.last_result.errors == 0
    sweeps = loop.sweeps
    store.create_task(task_id="t2", actor="normalize", deadline_at=LATER)
    clock.advance(minutes=20)
    assert Backstop(store, namespace="demo", metric=None).sweep().timed_out == 1  # t2 was due: nobody swept it
    assert loop.sweeps == sweeps


def test_local_loop_keeps_going_after_a_failing_sweep(mesh: Any, caplog: pytest.LogCaptureFixture) -> None:
    from asya_local.backstop_loop import BackstopLoop

    missing = TaskStore(table="asya-demo-missing", dynamodb=mesh.aws.dynamodb)
    loop = BackstopLoop(Backstop(missing, namespace="demo", metric=None), interval=0.02)
    with caplog.at_level(logging.ERROR, logger="asya_local.backstop_loop"):
        loop.start()
        try:
            _wait_for(lambda: loop.sweeps >= 2, "two sweeps")
        finally:
            loop.stop(timeout=10)
    assert loop.last_result is None
    assert "backstop sweep failed" in caplog.text and "ResourceNotFoundException" in caplog.text


def test_local_loop_rejects_a_bad_interval(store: TaskStore) -> None:
    from asya_local.backstop_loop import BackstopLoop
    from asya_local.exceptions import LocalModeError

    with pytest.raises(LocalModeError, match="backstop interval must be > 0 seconds, got 0"):
        BackstopLoop(Backstop(store, namespace="demo", metric=None), interval=0)
