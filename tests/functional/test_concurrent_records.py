"""Concurrent records of one batch for async handlers (P-PROC-1, P-TIME-6, P-ACK-3, P-ACK-7, P-ACK-8, P-TRACE-4).

An actor with ``ASYA_RECORD_CONCURRENCY`` N runs its batch's records as tasks of the async handler's loop, N at a
time. The handler here is a barrier (``concurrent_handlers.barrier``): no call proceeds until every expected call has
started, so these tests pass only when the records really overlap, and never wait on a clock. Claims and fences
are the sequential ones, taken record by record before each call.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya import logkeys
from asya.config import ActorConfig
from asya.exceptions import ManifestError
from asya.manifest import Manifest, load_manifest, parse_manifest
from asya.sidecar import ActorRuntime
from asya_deploy.environment import actor_environment
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.preflight import mesh_problems
from tests.functional import actors
from tests.functional.actors import NOW, Context, envelope

pytestmark = pytest.mark.functional


class Harness(actors.Harness):
    """An actor whose handler is ``concurrent_handlers.<handler>`` (or ``module``'s), N records at a time."""

    def __init__(self, mesh: Any, handler: str, clock: list[datetime], *, concurrency: int, **kwargs: Any) -> None:
        env = {"ASYA_RECORD_CONCURRENCY": str(concurrency), **kwargs.pop("env", {})}
        kwargs.setdefault("module", "concurrent_handlers")
        super().__init__(mesh, handler, clock=lambda: clock[0], env=env, **kwargs)

    def handle(self, *bodies: dict[str, Any]) -> list[int]:
        """Deliver ``bodies`` as one batch, ack the records that succeeded; the positions of the failed ones."""
        event = self.event(*bodies)
        response = self.runtime.handle(event, Context())
        ids = [r["messageId"] for r in event["Records"]]
        failed = [ids.index(f["itemIdentifier"]) for f in response["batchItemFailures"]]
        for position, record in enumerate(event["Records"]):
            if position not in failed:
                self.sqs.delete_message(QueueUrl=self.url(self.actor), ReceiptHandle=record["receiptHandle"])
        return failed

    def fence(self, task_id: str, sk: str = "TASK") -> tuple[int, int]:
        key = {"pk": {"S": f"TASK#{task_id}"}, "sk": {"S": sk}}
        item = self.mesh.aws.dynamodb.get_item(TableName=self.mesh.resources.table, Key=key)["Item"]
        return int(item["fence_h"]["N"]), int(item["fence_a"]["N"])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _module() -> Any:
    return sys.modules["concurrent_handlers"]


@pytest.fixture
def make(mesh: Any) -> Iterator[Callable[..., Harness]]:
    """``make(handler, concurrency=N)``; teardown closes the handlers' event loops."""
    clock = [NOW]
    made: list[Harness] = []

    def build(handler: str = "barrier", *, concurrency: int = 4, **kwargs: Any) -> Harness:
        made.append(Harness(mesh, handler, clock, concurrency=concurrency, **kwargs))
        return made[-1]

    yield build
    for h in made:
        h.runtime.close()


def _tasks(h: Harness, *ids: str, **payload: Any) -> list[dict[str, Any]]:
    for task_id in ids:
        h.store.create_task(task_id=task_id, actor="normalize", payload={"text": task_id})
    return [envelope(task_id, payload={"text": task_id, **payload}) for task_id in ids]


def test_p_proc_1_every_record_of_the_batch_is_running_before_any_proceeds(make: Callable[..., Harness]) -> None:
    h = make(concurrency=4)
    _module().reset(4)
    ids = ("t-c1", "t-c2", "t-c3", "t-c4")
    assert h.handle(*_tasks(h, *ids)) == []
    started = _module().STARTED
    assert started == list(ids)  # started in batch order
    assert sorted(m["id"] for m in h.drain("analyze")) == sorted(ids)
    assert all(h.fence(task_id) == (1, 1) for task_id in ids)  # each record claimed its own hop (P-ACK-8)
    assert h.drain("x-sump") == []


def test_p_trace_4_concurrent_records_never_see_each_others_correlation_id(make: Callable[..., Harness]) -> None:
    h = make(concurrency=2)
    _module().reset(2)
    lines = _Lines()
    logger = _module().LOG
    logger.setLevel(logging.INFO)
    logkeys.install(logger)
    logger.addHandler(lines)
    try:
        assert h.handle(*_tasks(h, "t-log-a", "t-log-b")) == []
    finally:
        logger.removeHandler(lines)
    # both started before either proceeded: each "proceeds" line was logged after the other record set its keys
    assert [r.getMessage() for r in lines.records] == ["started", "started", "proceeds", "proceeds"]
    by_record = {(r.getMessage(), r.__dict__.get("correlation_id")) for r in lines.records}
    assert by_record == {
        ("started", "t-log-a"),
        ("started", "t-log-b"),
        ("proceeds", "t-log-a"),
        ("proceeds", "t-log-b"),
    }


def test_p_trace_3_concurrent_records_send_each_with_their_own_trace_header(make: Callable[..., Harness]) -> None:
    traces = {
        "t-trace-a": "Root=1-67a1b2c3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1",
        "t-trace-b": "Root=1-67a1b2c3-fedcba9876543210fedcba98;Parent=1111222233334444;Sampled=1",
    }
    h = make(concurrency=2, env={"ASYA_TRACING": "true"}, environ={})
    _module().reset(2)
    sent: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.extend(params.get("Entries", []))

    h.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", record, unique_id="concur-trace")
    try:
        event = h.event(*_tasks(h, *traces), traces=list(traces.values()))
        assert h.runtime.handle(event, Context()) == {"batchItemFailures": []}
    finally:
        h.sqs.meta.events.unregister("before-parameter-build.sqs.SendMessageBatch", unique_id="concur-trace")
    by_id = {
        json.loads(m["MessageBody"])["id"]: m["MessageSystemAttributes"]["AWSTraceHeader"]["StringValue"] for m in sent
    }
    assert by_id == traces


def test_p_ack_3_a_failing_record_does_not_fail_the_others(make: Callable[..., Harness]) -> None:
    h = make(concurrency=3)
    _module().reset(3)
    ok = _tasks(h, "t-ok-1", "t-ok-2")
    [bad] = _tasks(h, "t-bad", fail=True)
    assert h.handle(ok[0], bad, ok[1]) == []  # a handler error is routed (x-sink), not a failed record
    assert sorted(m["id"] for m in h.drain("analyze")) == ["t-ok-1", "t-ok-2"]
    [sunk] = h.drain("x-sink")
    assert (sunk["id"], sunk["status"]["phase"]) == ("t-bad", "failed")


def test_p_ack_8_a_held_hop_fails_alone_and_two_copies_run_the_handler_once(make: Callable[..., Harness]) -> None:
    earlier = make("echo", concurrency=1, module="claim_handlers")
    [held] = _tasks(earlier, "t-held")
    assert earlier.handle(held) == []  # a run that claimed the hop; its lease is live
    earlier.drain("analyze")

    h = make(concurrency=4)
    _module().reset(2)
    [twice, other] = _tasks(h, "t-twice", "t-other")
    assert h.handle(held, twice, twice, other) == [0]  # the held hop fails and comes back when the lease ends
    assert sorted(_module().STARTED) == ["t-other", "t-twice"]  # the second copy was acked as a duplicate
    assert sorted(m["id"] for m in h.drain("analyze")) == ["t-other", "t-twice"]


def test_p_fan_3_a_fan_outs_slices_in_one_batch_run_at_once_each_under_its_own_claim(
    make: Callable[..., Harness],
) -> None:
    split = make("fan_out", concurrency=1, module="claim_handlers")
    [env] = _tasks(split, "t-slices")
    assert split.handle(env) == []
    slices = split.drain("analyze")  # frame 0 and two children
    assert len(slices) == 3

    h = make(concurrency=3, actor="analyze")
    _module().reset(3)
    assert h.handle(*slices) == []
    assert len(_module().STARTED) == 3  # all three were running before any proceeded
    children = [m for m in slices if m["id"] != "t-slices"]
    assert h.fence("t-slices") == (2, 1)
    assert all(h.fence("t-slices", f"CHILD#{child['id']}") == (2, 1) for child in children)

    _module().reset(3)
    assert h.handle(*slices) == [0, 1, 2]  # copies while the claims are live: held, never run again
    assert _module().STARTED == []


def test_p_time_7_a_record_past_its_limit_is_cancelled_alone(make: Callable[..., Harness]) -> None:
    h = make("hang_or_echo", concurrency=2, env={"ASYA_ACTOR_TIMEOUT": "1"})
    [stuck] = _tasks(h, "t-stuck", hang=True)
    [fine] = _tasks(h, "t-fine")
    assert h.handle(stuck, fine) == []
    assert [m["id"] for m in h.drain("analyze")] == ["t-fine"]
    [sump] = h.drain("x-sump")
    assert (sump["id"], sump["status"]["reason"]) == ("t-stuck", "HandlerTimeout")


def test_p_abi_2_concurrent_records_refuse_a_sync_handler(make: Callable[..., Harness]) -> None:
    h = make("echo", concurrency=2, module="claim_handlers")
    [env] = _tasks(h, "t-sync")
    assert h.handle(env) == []
    [sump] = h.drain("x-sump")
    error = sump["status"]["error"]
    assert "record_concurrency 2 needs an async handler" in error["message"]
    assert h.drain("analyze") == []


def _local_manifest(tmp_path: Path, namespace: str, handler: str) -> Manifest:
    text = {
        "namespace": namespace,
        "actors": {
            "normalize": {
                "handler": handler,
                "code": str(actors.HANDLERS),
                "timeout": "30s",
                "batch_size": 4,
                "record_concurrency": 4,
            },
            "analyze": {"handler": "concurrent_handlers.barrier", "code": str(actors.HANDLERS)},
        },
        "flows": {"text-pipeline": {"route": ["normalize", "analyze"]}},
    }
    path = tmp_path / "asya.yaml"
    path.write_text(yaml.safe_dump(text), encoding="utf-8")
    return load_manifest(path)


def test_p_proc_1_the_local_event_source_runs_a_batch_concurrently(
    mesh: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Local mode wires an actor as the CDK app does (``asya_local.mesh``): the actor's environment, its Lambda
    timeout by rounds (P-MAN-4) and one batch of its queue through the ESM emulator."""
    manifest = _local_manifest(tmp_path, mesh.resources.namespace, "concurrent_handlers.barrier")
    assert mesh_problems(manifest, instantiate=False) == []
    [actor] = [a for a in manifest.deployed_actors() if a.name == "normalize"]
    assert actor.lambda_timeout == 1 * 30 + 10  # four records at once: one round
    env = actor_environment(
        manifest, actor, table=mesh.resources.table, bucket=mesh.resources.bucket, code_dir=actors.HANDLERS
    )
    runtime = ActorRuntime(
        ActorConfig.from_env(env), sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3, clock=lambda: NOW
    )
    queue = str(mesh.resources.queue_urls["normalize"])
    store = mesh.store(lambda: NOW)
    ids = ["t-local-1", "t-local-2", "t-local-3", "t-local-4"]
    for task_id in ids:
        store.create_task(task_id=task_id, actor="normalize", payload={"text": task_id})
        mesh.aws.sqs.send_message(
            QueueUrl=queue, MessageBody=json.dumps(envelope(task_id, payload={"text": task_id}, nxt=["analyze"]))
        )
    _module().reset(4)
    request.addfinalizer(runtime.close)
    esm = EventSourceMapping(
        EsmConfig(
            function_name=manifest.queue_name("normalize"),
            queue_url=queue,
            batch_size=actor.batch_size,
            lambda_timeout=actor.lambda_timeout,
        ),
        runtime.handle,
        sqs=mesh.aws.sqs,
    )
    assert esm.poll_once(wait_seconds=0) == 4
    assert sorted(_module().STARTED) == ids
    assert sorted(m["id"] for m in actors.drain(mesh.aws.sqs, str(mesh.resources.queue_urls["analyze"]))) == ids
    assert actors.drain(mesh.aws.sqs, queue) == []  # acked: the emulator deleted the batch


def test_p_proc_1_synth_and_dev_refuse_concurrent_records_of_a_sync_handler(mesh: Any, tmp_path: Path) -> None:
    manifest = _local_manifest(tmp_path, mesh.resources.namespace, "claim_handlers.echo")
    for instantiate in (False, True):
        [problem] = mesh_problems(manifest, instantiate=instantiate)
        assert problem.startswith("actors.normalize.handler: record_concurrency 4 needs an async handler")


def test_p_man_1_record_concurrency_over_batch_size_is_refused_naming_the_field() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest({"namespace": "demo", "actors": {"a": {"handler": "m.f", "record_concurrency": 3}}})
    assert "actors.a.record_concurrency: 3 is over batch_size 1" in str(caught.value)
