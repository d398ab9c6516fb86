"""SQS sends against moto (P-ROUTE-8, P-ROUTE-9, P-ROUTE-10, P-LARGE-3)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from asya.envelope import Envelope, Route, Status
from asya.exceptions import SerializationError
from asya.transport import MAX_MESSAGE_BYTES, Transport, TransportError, UnknownActorError

pytestmark = pytest.mark.functional


def _env(env_id: str, payload: Any = None, curr: str = "analyze") -> Envelope:
    return Envelope(
        id=env_id, route=Route([], curr, []), payload={"n": env_id} if payload is None else payload, status=Status()
    )


class Calls:
    """Counts SQS operations made through a client (a botocore event hook on the real client)."""

    def __init__(self, client: Any) -> None:
        self.ops: Counter[str] = Counter()
        client.meta.events.register("before-call.sqs.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.ops[model.name] += 1


def _drain(aws: Any, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        messages = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return out
        for m in messages:
            out.append(json.loads(m["Body"]))
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


@pytest.fixture
def queues(aws: Any) -> dict[str, str]:
    return {a: aws.sqs.create_queue(QueueName=f"asya-demo-{a}")["QueueUrl"] for a in ("analyze", "summarize")}


def test_send_writes_the_envelope_json(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    env = _env("e1", payload={"text": "é"})
    message_id = transport.send("analyze", env)
    [got] = aws.sqs.receive_message(QueueUrl=queues["analyze"])["Messages"]
    assert got["MessageId"] == message_id
    assert got["Body"] == env.to_json()


def test_send_with_delay(aws: Any, queues: dict[str, str]) -> None:
    Transport(namespace="demo", sqs=aws.sqs).send("analyze", _env("late"), delay_seconds=60)
    assert aws.sqs.receive_message(QueueUrl=queues["analyze"]).get("Messages", []) == []


def test_queue_url_is_resolved_once_per_actor(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    calls = Calls(aws.sqs)
    for i in range(3):
        transport.send("analyze", _env(f"e{i}"))
    assert transport.queue_url("analyze") == queues["analyze"]
    assert calls.ops["GetQueueUrl"] == 1
    assert calls.ops["SendMessage"] == 3


def test_gw_create_7_with_the_account_id_queue_urls_need_no_get_queue_url(aws: Any, queues: dict[str, str]) -> None:
    """R2: with ``ASYA_ACCOUNT_ID`` (moto's account locally) the URL is built from the endpoint, no ``GetQueueUrl``;
    a queue that does not exist shows at the send as an unknown actor (P-ROUTE-8)."""
    transport = Transport(namespace="demo", sqs=aws.sqs, account_id="123456789012")
    calls = Calls(aws.sqs)
    transport.send("analyze", _env("e1"))
    transport.send("summarize", _env("e2"))
    assert transport.queue_url("analyze") == queues["analyze"]
    assert calls.ops["GetQueueUrl"] == 0
    assert calls.ops["SendMessage"] == 2
    assert [m["id"] for m in _drain(aws, queues["analyze"])] == ["e1"]
    with pytest.raises(UnknownActorError, match="'ghost'"):
        transport.send("ghost", _env("e3"))
    assert calls.ops["GetQueueUrl"] == 0


@pytest.mark.parametrize("name", ["Bad_Name", "", "9lives", "a" * 41])
def test_p_route_8_invalid_name_is_rejected_before_any_call(aws: Any, name: str) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    calls = Calls(aws.sqs)
    with pytest.raises(UnknownActorError, match="not a valid actor name") as info:
        transport.send(name, _env("x"))
    assert info.value.actor == name
    assert sum(calls.ops.values()) == 0


def test_p_route_8_missing_queue_is_unknown_actor(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    with pytest.raises(UnknownActorError, match="queue 'asya-demo-ghost' does not exist"):
        transport.queue_url("ghost")


def test_p_route_8_queue_deleted_after_caching_is_unknown_actor(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    transport.queue_url("analyze")
    aws.sqs.delete_queue(QueueUrl=queues["analyze"])
    with pytest.raises(UnknownActorError):
        transport.send("analyze", _env("gone"))
    [result] = transport.send_batch([("analyze", _env("gone2"))])
    assert not result.ok
    assert isinstance(result.error, UnknownActorError)


def test_p_route_9_batch_groups_per_queue_in_order_at_most_ten(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    items = [("analyze", _env(f"a{i}")) for i in range(13)] + [("summarize", _env(f"s{i}")) for i in range(3)]
    calls = Calls(aws.sqs)
    results = transport.send_batch(items)
    assert [r.ok for r in results] == [True] * 16
    assert [r.actor for r in results] == [a for a, _ in items]
    assert calls.ops["SendMessageBatch"] == 3  # 10 + 3 to analyze, 3 to summarize
    assert sorted(e["id"] for e in _drain(aws, queues["analyze"])) == sorted(f"a{i}" for i in range(13))
    assert len(_drain(aws, queues["summarize"])) == 3


def test_p_route_9_batch_is_split_at_one_mib(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    big = "x" * 300_000
    calls = Calls(aws.sqs)
    results = transport.send_batch([("analyze", _env(f"b{i}", payload=big)) for i in range(5)])
    assert all(r.ok for r in results)
    assert calls.ops["SendMessageBatch"] == 2  # 3 x 300 KB fit in 1 MiB, the 4th would not
    assert len(_drain(aws, queues["analyze"])) == 5


def test_p_route_8_unknown_destination_in_a_batch_does_not_stop_the_others(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    results = transport.send_batch([("analyze", _env("ok1")), ("ghost", _env("lost")), ("analyze", _env("ok2"))])
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error is not None and results[1].error.actor == "ghost"
    assert sorted(e["id"] for e in _drain(aws, queues["analyze"])) == ["ok1", "ok2"]


def test_p_large_3_body_over_the_sqs_limit_is_a_serialization_error(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    with pytest.raises(SerializationError, match="over the SQS limit"):
        transport.send_batch([("analyze", _env("ok")), ("analyze", _env("huge", payload="x" * MAX_MESSAGE_BYTES))])
    assert _drain(aws, queues["analyze"]) == [], "nothing is sent when a body cannot be"


def test_p_abi_20_nan_is_a_serialization_error(aws: Any, queues: dict[str, str]) -> None:
    with pytest.raises(SerializationError, match="cannot be encoded"):
        Transport(namespace="demo", sqs=aws.sqs).send("analyze", _env("nan", payload=float("nan")))


class FlakyBatch:
    """Fault injection on the real client: the first ``failing_calls`` SendMessageBatch calls report entry ``bad_id``
    as failed; the other entries are really sent to moto by a second client."""

    def __init__(self, aws: Any, *, failing_calls: int, bad_body_id: str) -> None:
        self.left = failing_calls
        self.bad = bad_body_id
        self._real = aws.session.client("sqs")
        self._params: dict[str, Any] = {}
        aws.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._keep)
        aws.sqs.meta.events.register("before-call.sqs.SendMessageBatch", self._call)

    def _keep(self, params: dict[str, Any], **_: Any) -> None:
        self._params = params

    def _call(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if self.left == 0:
            return None
        self.left -= 1
        entries = self._params["Entries"]
        bad = [e for e in entries if json.loads(e["MessageBody"])["id"] == self.bad]
        good = [e for e in entries if e not in bad]
        successful = self._real.send_message_batch(QueueUrl=self._params["QueueUrl"], Entries=good)["Successful"]
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "injected"} for e in bad]
        return AWSResponse("https://sqs", 200, HTTPHeaders(), None), {"Successful": successful, "Failed": failed}


def test_p_route_10_failed_entries_are_retried_with_backoff(aws: Any, queues: dict[str, str]) -> None:
    sleeps: list[float] = []
    transport = Transport(namespace="demo", sqs=aws.sqs, sleep=sleeps.append)
    FlakyBatch(aws, failing_calls=2, bad_body_id="e1")
    results = transport.send_batch([("analyze", _env(f"e{i}")) for i in range(3)])
    assert all(r.ok for r in results)
    assert sleeps == [0.1, 0.2]
    assert sorted(e["id"] for e in _drain(aws, queues["analyze"])) == ["e0", "e1", "e2"], "each sent exactly once"


def test_p_route_10_entry_still_failing_after_three_retries_raises(aws: Any, queues: dict[str, str]) -> None:
    sleeps: list[float] = []
    transport = Transport(namespace="demo", sqs=aws.sqs, sleep=sleeps.append)
    FlakyBatch(aws, failing_calls=10, bad_body_id="e1")
    with pytest.raises(TransportError, match="still failing after 3 retries") as info:
        transport.send_batch([("analyze", _env(f"e{i}")) for i in range(3)])
    assert sleeps == [0.1, 0.2, 0.4]
    assert [r.ok for r in info.value.results] == [True, False, True], "the error names what went out"
    assert sorted(e["id"] for e in _drain(aws, queues["analyze"])) == ["e0", "e2"]


def test_p_route_10_send_prepared_keeps_each_entry_outcome_apart(aws: Any, queues: dict[str, str]) -> None:
    """``send_prepared`` (the batch outbox's send) groups per queue and never raises for an entry: a failing one and
    an unknown destination are reported on their own results, every other entry still goes out."""
    transport = Transport(namespace="demo", sqs=aws.sqs, sleep=lambda _s: None)
    calls = Calls(aws.sqs)  # registered first: FlakyBatch answers the calls it fails itself
    FlakyBatch(aws, failing_calls=10, bad_body_id="e1")
    actors = ["analyze", "summarize", "analyze", "ghost", "summarize"]
    results = transport.send_prepared([transport.prepare(a, _env(f"e{i}")) for i, a in enumerate(actors)])
    assert [r.ok for r in results] == [True, False, True, False, True]
    assert isinstance(results[1].failure, TransportError)
    assert isinstance(results[3].error, UnknownActorError) and results[3].failure is None
    assert calls.ops["SendMessageBatch"] == 2 + 3, "one call per queue, then 3 retries of the failing entry"
    assert sorted(e["id"] for e in _drain(aws, queues["analyze"])) == ["e0", "e2"]
    assert sorted(e["id"] for e in _drain(aws, queues["summarize"])) == ["e4"]


def test_change_visibility(aws: Any, queues: dict[str, str]) -> None:
    transport = Transport(namespace="demo", sqs=aws.sqs)
    transport.send("analyze", _env("v"))
    [m] = aws.sqs.receive_message(QueueUrl=queues["analyze"], VisibilityTimeout=300)["Messages"]
    assert transport.visibility_timeout("analyze") == 30
    transport.change_visibility("analyze", [m["ReceiptHandle"]], 0)
    assert [json.loads(x["Body"])["id"] for x in aws.sqs.receive_message(QueueUrl=queues["analyze"])["Messages"]] == [
        "v"
    ]


def test_no_client_is_created_before_the_first_send() -> None:
    transport = Transport(namespace="demo")
    assert transport._sqs is None
