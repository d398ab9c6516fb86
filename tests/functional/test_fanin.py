"""Fan-in against the moto mesh (PROTOCOL section 7: P-FANIN-1..5, P-AGG-1..9; P-SINK-3, P-ACK-8; GATEWAY GW-DATA-2,
GW-DATA-7): the example mesh's ``chunk`` (a fan-in actor, ``fan_in: {key: /summaries}``) -> ``summarize-chunk`` ->
``x-fanin-chunk`` -> ``digest``, driven record by record with the tests' handlers, the real aggregator runtime and
x-sink, and metered with ``bench.meter``."""

from __future__ import annotations

import json
import random
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any

import pytest

from asya.config import ActorConfig
from asya.store import TaskStore
from asya.timeutil import format_ts
from asya_crew.aggregator import AggregatorRuntime
from asya_crew.fanin_state import ITEM_PAYLOAD_LIMIT, slice_object_key
from asya_crew.sink import SinkRuntime
from bench.meter import Meter
from tests.functional.actors import NOW, Context, Harness, actor_env, deliver, drain, envelope, queue_arn

pytestmark = pytest.mark.functional

AGG = "x-fanin-chunk"
FAN_IN_ENV = {"ASYA_FAN_IN": json.dumps({"aggregator": AGG, "key": "/squares"})}
ROUTE_NEXT = ["summarize-chunk", AGG, "digest"]


class Clock:
    """A clock the test moves forward."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Crash(BaseException):
    """An invocation dying (P-ACK-5): no batch response."""


class Flow:
    """The fan-in flow's runtimes on one mesh."""

    def __init__(self, mesh: Any, clock: Clock, *, shard_size: int | None = None) -> None:
        self.mesh = mesh
        self.clock = clock
        self.chunk = Harness(mesh, "fan", actor="chunk", module="fanin_handlers", clock=clock, env=FAN_IN_ENV)
        self.work = Harness(mesh, "square", actor="summarize-chunk", module="fanin_handlers", clock=clock)
        self.digest = Harness(mesh, "total", actor="digest", module="fanin_handlers", clock=clock)
        extra = {} if shard_size is None else {"shard_size": shard_size}
        self.aggregator = AggregatorRuntime(
            ActorConfig.from_env(actor_env(mesh, AGG)),
            sqs=mesh.aws.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=clock,
            **extra,
        )
        self.sink = SinkRuntime(
            ActorConfig.from_env(actor_env(mesh, "x-sink")),
            sqs=mesh.aws.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=clock,
        )
        self.store: TaskStore = self.chunk.store

    def start(self, task_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Create the task and return its first envelope, at ``chunk``."""
        # far enough for the crash test's clock jump past the aggregator's visibility timeout
        deadline = NOW + timedelta(hours=2)
        self.store.create_task(
            task_id=task_id, actor="chunk", flow="documents", payload=payload, deadline_at=format_ts(deadline)
        )
        return envelope(
            task_id,
            curr="chunk",
            nxt=list(ROUTE_NEXT),
            payload=payload,
            headers={"x-asya-flow": "documents"},
            deadline=deadline,
        )

    def slices(self, task_id: str, n: int, **payload: Any) -> list[dict[str, Any]]:
        """Run ``chunk`` on a new task yielding ``n`` frames, then ``summarize-chunk`` on every child slice: every
        slice as it reaches the aggregator, in index order."""
        _, failed = self.chunk.run(self.start(task_id, {"n": n, **payload}))
        assert failed == []
        children = self.chunk.drain("summarize-chunk")
        assert len(children) == n
        for start in range(0, n, 10):
            _, failed = self.work.run(*children[start : start + 10])
            assert failed == []
        out = self.chunk.drain(AGG)
        assert len(out) == n + 1
        return sorted(out, key=lambda e: e["headers"]["x-asya-fan-in"]["slice_index"])

    def aggregate(self, bodies: list[dict[str, Any]], meter: Meter | None = None) -> list[str]:
        """Deliver ``bodies`` to the aggregator in batches of 10; the failed record ids. With ``meter``, the
        aggregator's own calls are metered as its component."""
        failed: list[str] = []
        url = self.mesh.resources.queue_urls[AGG]
        for start in range(0, len(bodies), 10):
            event = deliver(self.mesh.aws.sqs, url, bodies[start : start + 10], arn=queue_arn(self.mesh, AGG))
            with meter.component(AGG) if meter is not None else nullcontext():
                response = self.aggregator.handle(event, Context())
            failed += [f["itemIdentifier"] for f in response["batchItemFailures"]]
        return failed

    def run_sink(self, bodies: list[dict[str, Any]] | None = None) -> None:
        """Run x-sink on ``bodies``, by default on everything waiting on its queue."""
        if bodies is None:
            bodies = drain(self.mesh.aws.sqs, self.mesh.resources.queue_urls["x-sink"])
        if bodies:
            url = self.mesh.resources.queue_urls["x-sink"]
            event = deliver(self.mesh.aws.sqs, url, bodies, arn=queue_arn(self.mesh, "x-sink"))
            assert self.sink.handle(event, Context())["batchItemFailures"] == []


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def flow(mesh: Any, clock: Clock) -> Flow:
    return Flow(mesh, clock)


def _shuffled_with_duplicates(bodies: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = bodies + [rng.choice(bodies) for _ in range(max(1, len(bodies) // 3))]
    rng.shuffle(out)
    return out


def _aggregator_usage(meter: Meter) -> tuple[int, int]:
    """(requests, DynamoDB write units) the aggregator component made."""
    requests = wru = 0
    for (component, _service, _operation), usage in meter.snapshot().items():
        if component == AGG:
            requests += usage.requests
            wru += usage.wru
    return requests, wru


@pytest.mark.parametrize("n", [1, 3, 100])
def test_p_agg_3_to_6_slices_out_of_order_with_duplicates_merge_once_in_numeric_order_at_linear_cost(
    mesh: Any, flow: Flow, n: int
) -> None:
    """P-FANIN-3 slices, P-AGG-3 counted once each (duplicates change nothing), P-AGG-4 emitted once, P-AGG-5 merged
    in numeric slice order (index 10 after 9, not after 1), P-AGG-6 under the origin id, at a request count and write
    units linear in the deliveries (the meter)."""
    slices = flow.slices("t-fan", n)
    parent = slices[0]
    assert parent["id"] == "t-fan" and parent["route"] == {"prev": ["chunk"], "curr": AGG, "next": ["digest"]}
    assert [s["headers"]["x-asya-fan-in"]["slice_count"] for s in slices] == [n + 1] * (n + 1)
    assert all(s["parent_id"] == "t-fan" for s in slices[1:])
    deliveries = _shuffled_with_duplicates(slices, seed=n)
    meter = Meter(shadow_dynamodb=mesh.aws.session.client("dynamodb"))
    for client in (mesh.aws.sqs, mesh.aws.dynamodb, mesh.aws.s3):
        meter.attach(client)
    assert flow.aggregate(deliveries, meter) == []
    [merged] = drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"])
    assert merged["id"] == "t-fan" and "parent_id" not in merged
    assert merged["route"] == {"prev": ["chunk", AGG], "curr": "digest", "next": []}
    assert merged["headers"]["x-asya-origin-id"] == "t-fan" and "x-asya-fan-in" not in merged["headers"]
    assert merged["status"]["phase"] == "pending" and merged["status"]["actor"] == "digest"
    assert merged["payload"]["n"] == n
    assert [s["i"] for s in merged["payload"]["squares"]] == list(range(n))
    requests, wru = _aggregator_usage(meter)
    batches = -(-len(deliveries) // 10)
    # per delivery: slice put + set-add + the child's finished mark (P-ACK-7 (R3)); per batch: the pre-flight read;
    # once: one BatchGetItem per 100 slices, the claim, the mark, the send, the visibility timeout and two queue URLs
    # (no ASYA_ACCOUNT_ID here)
    assert requests <= 3 * len(deliveries) + batches + -(-(n + 1) // 100) + 6
    assert wru <= 4 * len(deliveries) + 2
    # the task moves on under its own id: digest's claim and x-sink's final write
    _, failed = flow.digest.run(merged)
    assert failed == []
    flow.run_sink()
    task = flow.store.get_task("t-fan")
    assert task is not None and task["status"] == "succeeded"
    assert task["result"] == {"n": n, "sum": sum(i * i for i in range(n))}


def test_p_agg_3_sharded_set_counts_each_slice_once_across_shards(mesh: Any, clock: Clock) -> None:
    """P-AGG-3's sharded set-add: with 4 indexes per shard, 11 slices fill 3 shards; out of order and with
    duplicates the set completes exactly once."""
    flow = Flow(mesh, clock, shard_size=4)
    slices = flow.slices("t-shard", 10)
    assert flow.aggregate(_shuffled_with_duplicates(slices, seed=7)) == []
    [merged] = drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"])
    assert [s["i"] for s in merged["payload"]["squares"]] == list(range(10))
    items = mesh.aws.dynamodb.query(
        TableName=mesh.resources.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :set)",
        ExpressionAttributeValues={":pk": {"S": "FANIN#t-shard"}, ":set": {"S": "SET"}},
    )["Items"]
    by_sk = {item["sk"]["S"]: item for item in items}
    assert sorted(by_sk) == ["SET", "SET#0000", "SET#0001", "SET#0002"]
    assert sorted(by_sk["SET"]["done"]["NS"]) == ["0", "1", "2"] and "emitted_at" in by_sk["SET"]
    assert len(by_sk["SET#0002"]["seen"]["NS"]) == 3
    # P-AGG-8: every item expires 15 days after the first slice
    assert int(by_sk["SET"]["ttl"]["N"]) == int(NOW.timestamp()) + 15 * 86_400


def test_p_agg_4_crash_between_send_and_mark_emits_at_most_twice_and_the_next_hop_absorbs_it(
    mesh: Any, flow: Flow, clock: Clock
) -> None:
    """P-AGG-4: the invocation dies after the merged send and before the mark; a duplicate within the claim's
    validity sends nothing; once the claim lapsed (the queue's visibility timeout) the redelivery emits again; after
    the mark nothing is emitted. P-ACK-8: the next actor's hop claim absorbs the second copy."""
    slices = flow.slices("t-crash", 3)
    assert flow.aggregate(slices[:-1]) == []
    state = flow.aggregator._state
    mark = state.mark

    def crash(origin_id: str, *, now_ms: int) -> None:
        raise Crash

    state.mark = crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        flow.aggregate(slices[-1:])
    state.mark = mark  # type: ignore[method-assign]
    clock.now += timedelta(seconds=5)
    assert flow.aggregate(slices[1:2]) == []  # the claim is still valid: acked, nothing sent
    visibility = next(a for a in mesh.manifest.deployed_actors() if a.name == AGG).visibility_timeout
    clock.now += timedelta(seconds=visibility + 1)
    assert flow.aggregate(slices[-1:]) == []  # the redelivery: the claim lapsed, emitted again, then marked
    assert flow.aggregate(slices[:1]) == []  # emitted: never again
    copies = drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"])
    assert [c["id"] for c in copies] == ["t-crash", "t-crash"]
    _, failed = flow.digest.run(copies[0])
    assert failed == []
    [done] = flow.digest.drain("x-sink")
    assert done["payload"] == {"n": 3, "sum": 5}
    flow.run_sink([done])
    # the second copy comes after the hop moved on (here: the task finished): a duplicate, no call, nothing sent
    _, failed = flow.digest.run(copies[1])
    assert failed == []
    assert flow.digest.drain("x-sink") == []
    task = flow.store.get_task("t-crash")
    assert task is not None and task["status"] == "succeeded" and task["result"] == {"n": 3, "sum": 5}


def test_p_sink_3_a_failed_slice_fails_the_task_at_once_and_later_slices_are_acked(mesh: Any, flow: Flow) -> None:
    """P-SINK-3: slice 2's worker fails (no retry policy: x-sink ``failed``); x-sink fails the origin task at once;
    the other slices reaching the aggregator afterwards are acked as slices of a finished task (pre-flight), and no
    merged envelope ever leaves."""
    _, failed = flow.chunk.run(flow.start("t-fail", {"n": 3, "fail_at": 1}))
    assert failed == []
    children = flow.chunk.drain("summarize-chunk")
    _, failed = flow.work.run(*children)
    assert failed == []
    flow.run_sink()
    task = flow.store.get_task("t-fail")
    assert task is not None and task["status"] == "failed" and task["failed_actor"] == "summarize-chunk"
    assert "slice 1 failed" in task["error"]
    assert len(drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sump"])) == 1
    assert flow.aggregate(flow.chunk.drain(AGG)) == []
    assert drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"]) == []


def test_p_fanin_2_a_handler_error_after_frames_sends_no_slice_and_follows_section_8(mesh: Any, flow: Flow) -> None:
    """P-FANIN-2: frames are held until the handler returns; an error after a frame sends none of them and is a
    plain handler error (no PartialFailure notice): here no policy, so x-sink ``failed``."""
    _, failed = flow.chunk.run(flow.start("t-err", {"n": 3, "fail": True}))
    assert failed == []
    assert flow.chunk.drain("summarize-chunk") == [] and flow.chunk.drain(AGG) == []
    assert flow.chunk.drain("x-sump") == []
    [out] = flow.chunk.drain("x-sink")
    assert out["status"]["phase"] == "failed" and out["status"]["error"]["type"] == "RuntimeError"


def test_p_fanin_3_slice_ids_are_deterministic_and_zero_frames_send_slice_0_alone(mesh: Any, flow: Flow) -> None:
    """P-FANIN-3: a re-run of the hop yields the same child slice ids; N = 0 sends one slice, the parent."""
    _, failed = flow.chunk.run(flow.start("t-det", {"n": 2}))
    assert failed == []
    ids = sorted(e["id"] for e in flow.chunk.drain("summarize-chunk"))
    flow.chunk.drain(AGG)
    flow.store.release_lease("t-det", None, (1, 1))
    body = envelope("t-det", curr="chunk", nxt=list(ROUTE_NEXT), payload={"n": 2}, headers={"x-asya-flow": "documents"})
    body["status"] = {**body["status"], "phase": "retrying", "actor": "chunk", "attempt": 2, "max_attempts": 3}
    _, failed = flow.chunk.run(body)
    assert failed == []
    assert sorted(e["id"] for e in flow.chunk.drain("summarize-chunk")) == ids
    flow.chunk.drain(AGG)
    _, failed = flow.chunk.run(flow.start("t-zero", {"n": 0}))
    assert failed == []
    [only] = flow.chunk.drain(AGG)
    assert only["id"] == "t-zero" and only["headers"]["x-asya-fan-in"]["slice_count"] == 1
    assert flow.aggregate([only]) == []
    [merged] = drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"])
    assert merged["payload"]["squares"] == []


def test_p_fanin_4_aggregator_missing_from_route_next_is_a_handler_error(mesh: Any, flow: Flow) -> None:
    """P-FANIN-4: ``ValueError: fan_in aggregator '<name>' is not in route.next``, nothing sent."""
    body = envelope("t-noagg", curr="chunk", nxt=["summarize-chunk"], payload={"n": 2})
    flow.store.create_task(task_id="t-noagg", actor="chunk", payload={"n": 2})
    _, failed = flow.chunk.run(body)
    assert failed == []
    assert flow.chunk.drain("summarize-chunk") == [] and flow.chunk.drain(AGG) == []
    [out] = flow.chunk.drain("x-sink")
    assert out["status"]["error"]["type"] == "ValueError"
    assert out["status"]["error"]["message"] == f"fan_in aggregator '{AGG}' is not in route.next"


def test_p_agg_3_a_slice_too_large_for_an_item_goes_to_s3_by_key(mesh: Any, flow: Flow) -> None:
    """P-AGG-3, GW-DATA-7: a slice payload over 100 KiB is stored at ``fanin/{origin}/slice-{i}.json`` and merged
    back from there."""
    slices = flow.slices("t-big", 2, pad=ITEM_PAYLOAD_LIMIT + 10)
    assert flow.aggregate(slices) == []
    [merged] = drain(mesh.aws.sqs, mesh.resources.queue_urls["digest"])
    assert [s["i"] for s in merged["payload"]["squares"]] == [0, 1]
    assert all(len(s["pad"]) == ITEM_PAYLOAD_LIMIT + 10 for s in merged["payload"]["squares"])
    stored = mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=slice_object_key("t-big", 1))
    assert json.loads(stored["Body"].read())["i"] == 0
    item = mesh.aws.dynamodb.get_item(
        TableName=mesh.resources.table, Key={"pk": {"S": "FANIN#t-big"}, "sk": {"S": "SLICE#000001"}}
    )["Item"]
    assert item["payload_s3"] == {"S": "fanin/t-big/slice-1.json"} and "payload" not in item


def test_p_agg_9_merge_failure_and_p_agg_2_count_mismatch_fail_the_task(mesh: Any, flow: Flow) -> None:
    """P-AGG-9: slice 0 not an object -> x-sink ``failed`` (``RuntimeError``) under the origin id, set marked;
    P-AGG-2: a slice announcing another ``slice_count`` fails the task the same way."""
    slices = flow.slices("t-merge", 1)
    slices[0]["payload"] = ["not", "an", "object"]
    assert flow.aggregate(slices) == []
    [out] = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sink"])
    assert out["id"] == "t-merge" and out["headers"]["x-asya-origin-id"] == "t-merge"
    assert out["status"]["phase"] == "failed" and out["status"]["reason"] == "RuntimeError"
    assert "must be a JSON object" in out["payload"]["error"]
    assert flow.aggregate(slices[:1]) == []  # marked emitted: a redelivery sends nothing
    assert drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sink"]) == []

    other = flow.slices("t-count", 2)
    assert flow.aggregate(other[:1]) == []
    wrong = json.loads(json.dumps(other[1]))
    wrong["headers"]["x-asya-fan-in"]["slice_count"] = 7
    assert flow.aggregate([wrong]) == []
    [out] = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sink"])
    assert out["id"] == "t-count" and "slice_count: 7 differs from the 3 stored" in out["status"]["error"]["message"]
    flow.run_sink([out])
    task = flow.store.get_task("t-count")
    assert task is not None and task["status"] == "failed"


def test_p_agg_2_a_missing_header_fails_the_named_task(mesh: Any, flow: Flow) -> None:
    """P-AGG-2: no ``x-asya-fan-in``: the task (``parent_id``, else ``id``) fails with a message naming the header."""
    body = envelope("t-nohdr", curr=AGG, prev=["chunk"], nxt=["digest"], payload={"a": 1})
    assert flow.aggregate([body]) == []
    [out] = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sink"])
    assert out["headers"]["x-asya-origin-id"] == "t-nohdr"
    assert "x-asya-fan-in is missing" in out["status"]["error"]["message"]


def test_p_route_8_an_unknown_next_actor_after_the_merge_goes_to_x_sump_and_fails_the_task(
    mesh: Any, flow: Flow
) -> None:
    """P-ROUTE-8, P-ERR-6: slice 0's route continues to an actor without a queue (a handler rewrote it): the merged
    envelope goes to x-sump (``UnknownActor``), the task fails, the set is marked (a redelivery sends nothing)."""
    slices = flow.slices("t-ghost", 1)
    slices[0]["route"]["next"] = ["ghost"]
    assert flow.aggregate(slices) == []
    [sump] = drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sump"])
    assert sump["status"]["reason"] == "UnknownActor" and sump["id"] == "t-ghost"
    task = flow.store.get_task("t-ghost")
    assert task is not None and task["status"] == "failed" and task["failed_actor"] == AGG
    assert flow.aggregate(slices[1:]) == []
    assert drain(mesh.aws.sqs, mesh.resources.queue_urls["x-sump"]) == []
