"""``asya_local.history.RunHistory`` against moto's SQS (in-process): what a step records, how sends are attributed
when the next actor already runs, the crash of an invocation, and the memory bounds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya_local.history import RunHistory
from asya_local.moto_server import AwsClients
from tests.caught import SHOWN, caught_envelopes

pytestmark = pytest.mark.functional


def _envelope(envelope_id: str, payload: Any, *, prev: list[str], curr: str, **extra: Any) -> dict[str, Any]:
    status = {"phase": extra.pop("phase", "pending"), "attempt": extra.pop("attempt", 1)}
    return {"id": envelope_id, "route": {"prev": prev, "curr": curr, "next": []}, "status": status,
            "payload": payload, **extra}  # fmt: skip


def _event(*envelopes: dict[str, Any]) -> dict[str, Any]:
    return {"Records": [{"messageId": f"m-{env['id']}", "body": json.dumps(env)} for env in envelopes]}


@pytest.fixture
def queues(aws: AwsClients) -> dict[str, str]:
    return {name: aws.sqs.create_queue(QueueName=f"asya-t-{name}")["QueueUrl"] for name in ("a", "b", "x-sink")}


def test_a_step_records_input_outputs_duration_and_children(aws: AwsClients, queues: dict[str, str]) -> None:
    """P-FAN-2: the first frame keeps the id, a child carries ``parent_id``; both are outputs of the step."""
    ticks = iter([10.0, 10.25, 20.0, 20.0])
    history = RunHistory(namespace="t", monotonic=lambda: next(ticks))
    history.attach(aws.sqs)

    def handler(event: dict[str, Any], context: Any) -> None:
        first = _envelope("t1", {"n": 1}, prev=["a"], curr="b")
        child = _envelope("c1", {"n": 2}, prev=["a"], curr="b", parent_id="t1")
        aws.sqs.send_message_batch(
            QueueUrl=queues["b"],
            Entries=[{"Id": "0", "MessageBody": json.dumps(first)}, {"Id": "1", "MessageBody": json.dumps(child)}],
        )

    history.wrap("a", handler)(_event(_envelope("t1", {"n": 0}, prev=[], curr="a", attempt=2)), None)
    recorded = history.get("t1")
    assert recorded is not None
    (step,) = recorded["steps"]
    assert step["actor"] == "a" and step["attempt"] == 2 and step["envelope_id"] == "t1"
    assert (step["input"], step["duration_ms"], step["message_id"], step["error"]) == ({"n": 0}, 250.0, "m-t1", None)
    assert step["outputs"] == [
        {"actor": "b", "envelope_id": "t1", "payload": {"n": 1}},
        {"actor": "b", "envelope_id": "c1", "payload": {"n": 2}},
    ]
    history.wrap("b", lambda event, context: None)(_event(_envelope("c1", {"n": 2}, prev=["a"], curr="b")), None)
    recorded = history.get("t1")
    assert recorded is not None
    assert [s["envelope_id"] for s in recorded["steps"]] == ["t1", "c1"]  # the child's step is under its task
    assert history.get("c1") is None


def test_the_next_actor_already_running_never_takes_the_senders_output(aws: AwsClients, queues: dict[str, str]) -> None:
    """SQS may deliver an envelope to the next actor before its sender's call returns: both steps are open with the
    same id, and the send still belongs to the sender; the gateway's first send belongs to no step."""
    history = RunHistory(namespace="t")
    history.attach(aws.sqs)
    created = _envelope("t2", {"n": 0}, prev=[], curr="a")

    def sender(event: dict[str, Any], context: Any) -> None:
        def receiver(event: dict[str, Any], context: Any) -> None:
            aws.sqs.send_message(QueueUrl=queues["a"], MessageBody=json.dumps(created))  # late gateway hook
            aws.sqs.send_message(QueueUrl=queues["b"], MessageBody=json.dumps(forward))

        forward = _envelope("t2", {"n": 1}, prev=["a"], curr="b")
        history.wrap("b", receiver)(_event(forward), None)

    history.wrap("a", sender)(_event(created), None)
    recorded = history.get("t2")
    assert recorded is not None
    by_actor = {step["actor"]: step for step in recorded["steps"]}
    assert [o["actor"] for o in by_actor["a"]["outputs"]] == ["b"]
    assert by_actor["b"]["outputs"] == []


def test_errors_come_from_a_retry_a_failure_or_a_crash(aws: AwsClients, queues: dict[str, str]) -> None:
    history = RunHistory(namespace="t")
    history.attach(aws.sqs)
    retry = _envelope("t3", {"n": 0}, prev=[], curr="a", phase="retrying", attempt=2)
    retry["status"]["error"] = {"type": "ValueError", "message": "not yet"}

    def retrying(event: dict[str, Any], context: Any) -> None:
        aws.sqs.send_message(QueueUrl=queues["a"], MessageBody=json.dumps(retry))

    history.wrap("a", retrying)(_event(_envelope("t3", {"n": 0}, prev=[], curr="a")), None)

    def crashing(event: dict[str, Any], context: Any) -> None:
        raise MemoryError("out of memory")

    with pytest.raises(MemoryError):
        history.wrap("a", crashing)(_event(retry), None)
    recorded = history.get("t3")
    assert recorded is not None
    assert [step["error"] for step in recorded["steps"]] == [
        "ValueError: not yet",
        "invocation crashed: MemoryError: out of memory",
    ]


def test_memory_is_bounded_by_tasks_steps_and_payload_size() -> None:
    history = RunHistory(namespace="t", max_tasks=2, max_steps=3, max_payload_bytes=20)
    noop = history.wrap("a", lambda event, context: None)
    for index in range(5):
        noop(_event(_envelope("t-big", {"i": index}, prev=[], curr="a")), None)
    noop(_event(_envelope("t-huge", {"text": "x" * 100}, prev=[], curr="a")), None)
    big = history.get("t-big")
    assert big is not None and big["truncated"] is True
    assert [step["input"] for step in big["steps"]] == [{"i": 2}, {"i": 3}, {"i": 4}]
    huge = history.get("t-huge")
    assert huge is not None and huge["steps"][0]["input"] == {"__truncated__": "111 bytes"}
    noop(_event(_envelope("t-new", {}, prev=[], curr="a")), None)
    assert history.get("t-big") is None  # the least recently active task went first
    assert history.get("t-huge") is not None and history.get("t-new") is not None


def test_bad_bounds_name_the_values() -> None:
    with pytest.raises(ValueError, match=r"^history bounds must be >= 1, got max_tasks=0, max_steps=1, "):
        RunHistory(namespace="t", max_tasks=0, max_steps=1)


@pytest.mark.parametrize("kind", ["call", "end", "slice"])
def test_a_call_whose_error_the_flow_caught_shows_its_error(aws: AwsClients, queues: dict[str, str], kind: str) -> None:
    """P-FLOW-9: the ``except`` clause's continuation goes on from the failed call's hop, so the step sent no
    ``failed`` status: it looked like a success. Its error is on the step, marked as caught."""
    history = RunHistory(namespace="t")
    history.attach(aws.sqs)
    entry, caught = caught_envelopes(kind, f"t-caught-{kind}")

    def failing(event: dict[str, Any], context: Any) -> None:
        for out in caught:
            aws.sqs.send_message(QueueUrl=queues[out.actor], MessageBody=out.envelope.to_json())

    history.wrap("a", failing)(_event(json.loads(entry.to_json())), None)
    recorded = history.get(entry.parent_id or entry.id)  # a slice's steps are under its task
    assert recorded is not None
    [step] = [s for s in recorded["steps"] if s["envelope_id"] == entry.id]
    assert [o["actor"] for o in step["outputs"]] == [out.actor for out in caught]
    assert step["error"] == SHOWN


def test_p_map_3_a_slice_handed_back_to_its_queue_is_no_step(aws: AwsClients, queues: dict[str, str]) -> None:
    """An invocation that sends a flow's fan-out slice back, unchanged, for another invocation ran nothing for it:
    only the slice it ran, and later the copy's delivery, are steps."""
    history = RunHistory(namespace="t")
    history.attach(aws.sqs)
    fan_in = {"origin_id": "t3", "slice_count": 3, "aggregation_key": "/r", "set": "t3/1"}
    one, two = (
        _envelope(
            f"c{i}",
            {"n": i},
            prev=["a"],
            curr="b",
            parent_id="t3",
            headers={"x-asya-fan-in": {**fan_in, "slice_index": i}},
        )
        for i in (1, 2)
    )

    def handler(event: dict[str, Any], context: Any) -> None:
        aws.sqs.send_message(QueueUrl=queues["b"], MessageBody=json.dumps(two))  # handed back
        done = {**one, "route": {"prev": ["a", "b"], "curr": "", "next": []}}
        aws.sqs.send_message(QueueUrl=queues["x-sink"], MessageBody=json.dumps(done))

    history.wrap("b", handler)(_event(one, two), None)
    recorded = history.get("t3")
    assert recorded is not None
    assert [s["envelope_id"] for s in recorded["steps"]] == ["c1"]
    history.wrap("b", lambda event, context: None)(_event(two), None)
    recorded = history.get("t3")
    assert recorded is not None
    assert [s["envelope_id"] for s in recorded["steps"]] == ["c1", "c2"]
