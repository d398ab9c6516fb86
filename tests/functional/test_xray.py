"""X-Ray: the ``AWSTraceHeader`` system attribute on the layer's and the crew's sends, against moto (P-TRACE-3).

A traced runtime (``ASYA_TRACING=true``) stamps every send of a record with the record's ``AWSTraceHeader``, else the
invocation's trace header (``_X_AMZN_TRACE_ID`` of the injected environment mapping, read per record); an untraced
one sends no ``MessageSystemAttributes`` at all. Single sends are read back with ``MessageSystemAttributeNames``;
moto 5.2 drops the system attributes of ``SendMessageBatch`` entries, so batched sends are checked on the request the
real boto3 client builds and validates (a botocore ``before-parameter-build`` hook).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from asya.config import ActorConfig
from asya.envelope import Envelope, Route, Status
from asya.transport import Transport
from asya_crew.sink import SinkRuntime
from tests.functional.actors import NOW, Context, Harness, actor_env, deliver, envelope, queue_arn

pytestmark = pytest.mark.functional

RECORD_TRACE = "Root=1-67a1b2c3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1"
OTHER_RECORD_TRACE = "Root=1-67a1b2c3-fedcba9876543210fedcba98;Parent=1111222233334444;Sampled=1"
INVOCATION_TRACE = "Root=1-67a1b2c4-aaaaaaaaaaaaaaaaaaaaaaaa;Parent=5555666677778888;Sampled=1;Lineage=a87bd80c:0"
NEXT_INVOCATION_TRACE = "Root=1-67a1b2c5-bbbbbbbbbbbbbbbbbbbbbbbb;Parent=9999aaaabbbbcccc;Sampled=1"


class Requests:
    """The parameters of every ``SendMessage``/``SendMessageBatch`` call made through a client, as boto3 built them."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("before-parameter-build.sqs.SendMessage", self._record)
        client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, json.loads(json.dumps(params))))

    def messages(self, queue_url: str) -> list[dict[str, Any]]:
        """Every message sent to ``queue_url``: the batch entries and the single sends, in order."""
        out: list[dict[str, Any]] = []
        for name, params in self.calls:
            if params["QueueUrl"] == queue_url:
                out.extend(params["Entries"] if name == "SendMessageBatch" else [params])
        return out

    def any_system_attributes(self) -> bool:
        return any("MessageSystemAttributes" in message for _, p in self.calls for message in p.get("Entries", [p]))


def _header(message: dict[str, Any]) -> str | None:
    value = message.get("MessageSystemAttributes", {}).get("AWSTraceHeader")
    if value is None:
        return None
    assert value["DataType"] == "String"
    return str(value["StringValue"])


class Actor(Harness):
    """``normalize`` running a ``sidecar_handlers`` function, traced or not, with an injected environment whose
    ``_X_AMZN_TRACE_ID`` a test sets as the Lambda runtime does per invocation."""

    def __init__(self, mesh: Any, handler: str, *, tracing: bool, extra: dict[str, str] | None = None) -> None:
        self.environ: dict[str, str] = {}
        env = {**({"ASYA_TRACING": "true"} if tracing else {}), **(extra or {})}
        super().__init__(mesh, handler, clock=lambda: NOW, env=env, environ=self.environ)
        self.requests = Requests(self.sqs)

    def handle(self, *inputs: tuple[dict[str, Any], str | None]) -> dict[str, Any]:
        """Put ``(envelope, AWSTraceHeader or None)`` messages on the queue, receive them as one Lambda event (with
        their system attributes) and handle it."""
        event = self.event(*(body for body, _ in inputs), traces=[trace for _, trace in inputs])
        self.requests.calls.clear()
        response: dict[str, Any] = self.runtime.handle(event, Context())
        assert response == {"batchItemFailures": []}
        return event

    def received(self, actor: str) -> list[tuple[dict[str, Any], str | None]]:
        """``(body, AWSTraceHeader or None)`` of every message waiting on ``actor``'s queue."""
        return receive_all(self.sqs, self.url(actor))


def receive_all(sqs: Any, url: str) -> list[tuple[dict[str, Any], str | None]]:
    out: list[tuple[dict[str, Any], str | None]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["AWSTraceHeader"])
        messages = got.get("Messages", [])
        if not messages:
            return out
        for m in messages:
            out.append((json.loads(m["Body"]), m.get("Attributes", {}).get("AWSTraceHeader")))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


# -- the layer --------------------------------------------------------------------------------------------------------


def test_p_trace_3_frames_carry_the_input_records_aws_trace_header(mesh: Any) -> None:
    actor = Actor(mesh, "echo", tracing=True)
    actor.environ["_X_AMZN_TRACE_ID"] = INVOCATION_TRACE
    event = actor.handle((envelope("t-1"), RECORD_TRACE))
    assert event["Records"][0]["attributes"]["AWSTraceHeader"] == RECORD_TRACE  # as Lambda hands it over
    [frame] = actor.requests.messages(actor.url("analyze"))
    assert _header(frame) == RECORD_TRACE
    assert [body["id"] for body, _ in actor.received("analyze")] == ["t-1"]


def test_p_trace_3_without_one_on_the_record_the_invocation_trace_header_is_used_read_per_invocation(
    mesh: Any,
) -> None:
    actor = Actor(mesh, "echo", tracing=True)
    actor.environ["_X_AMZN_TRACE_ID"] = INVOCATION_TRACE
    actor.handle((envelope("t-1"), None))
    assert [_header(m) for m in actor.requests.messages(actor.url("analyze"))] == [INVOCATION_TRACE]
    actor.environ["_X_AMZN_TRACE_ID"] = NEXT_INVOCATION_TRACE  # the Lambda runtime sets it anew per invocation
    actor.handle((envelope("t-2"), None))
    assert [_header(m) for m in actor.requests.messages(actor.url("analyze"))] == [NEXT_INVOCATION_TRACE]


def test_p_trace_3_frames_of_several_records_sent_together_each_carry_their_own_records_header(mesh: Any) -> None:
    actor = Actor(mesh, "echo", tracing=True)
    actor.environ["_X_AMZN_TRACE_ID"] = INVOCATION_TRACE
    actor.handle((envelope("t-1"), RECORD_TRACE), (envelope("t-2"), OTHER_RECORD_TRACE), (envelope("t-3"), None))
    batches = [p for name, p in actor.requests.calls if name == "SendMessageBatch"]
    assert [len(p["Entries"]) for p in batches] == [3]  # one SendMessageBatch for the three records' frames
    by_id = {json.loads(m["MessageBody"])["id"]: _header(m) for m in batches[0]["Entries"]}
    assert by_id == {"t-1": RECORD_TRACE, "t-2": OTHER_RECORD_TRACE, "t-3": INVOCATION_TRACE}


def test_p_trace_3_the_x_sink_send_carries_the_header(mesh: Any) -> None:
    actor = Actor(mesh, "nothing", tracing=True)  # zero frames: x-sink, Completed (single SendMessage)
    actor.handle((envelope("t-1"), RECORD_TRACE))
    [(body, trace)] = actor.received("x-sink")
    assert body["id"] == "t-1"
    assert trace == RECORD_TRACE


def test_p_trace_3_the_retry_send_carries_the_header(mesh: Any) -> None:
    resiliency = {
        "policies": {"default": {"max_attempts": 3, "initial_delay": 0, "jitter": False}},
        "rules": [{"errors": ["ValueError"], "policy": "default"}],
    }
    actor = Actor(mesh, "boom", tracing=True, extra={"ASYA_RESILIENCY": json.dumps(resiliency)})
    actor.environ["_X_AMZN_TRACE_ID"] = INVOCATION_TRACE
    actor.handle((envelope("t-1"), None))
    [(body, trace)] = actor.received("normalize")
    assert body["status"]["attempt"] == 2
    assert trace == INVOCATION_TRACE


def test_p_trace_3_the_x_sump_sends_of_unknown_destinations_carry_the_header(mesh: Any) -> None:
    actor = Actor(mesh, "to_ghost", tracing=True)
    actor.handle((envelope("t-1"), RECORD_TRACE))
    sumps = actor.requests.messages(actor.url("x-sump"))
    assert sumps
    assert {_header(m) for m in sumps} == {RECORD_TRACE}
    assert {_header(m) for m in actor.requests.messages(actor.url("analyze"))} == {RECORD_TRACE}


def test_p_trace_3_tracing_off_sends_no_system_attributes(mesh: Any) -> None:
    for handler in ("echo", "nothing", "to_ghost"):
        actor = Actor(mesh, handler, tracing=False)
        actor.environ["_X_AMZN_TRACE_ID"] = INVOCATION_TRACE
        actor.handle((envelope(), RECORD_TRACE))
        assert actor.requests.calls
        assert not actor.requests.any_system_attributes()
    assert {trace for _, trace in receive_all(mesh.aws.sqs, str(mesh.resources.queue_urls["x-sink"]))} == {None}


def test_p_trace_3_tracing_on_without_any_trace_header_sends_no_system_attributes(mesh: Any) -> None:
    actor = Actor(mesh, "echo", tracing=True)  # no record header, no _X_AMZN_TRACE_ID (the local mode)
    actor.handle((envelope("t-1"), None))
    assert actor.requests.calls
    assert not actor.requests.any_system_attributes()


# -- the crew ---------------------------------------------------------------------------------------------------------


def test_p_trace_3_x_sink_hook_copies_carry_the_records_header(mesh: Any) -> None:
    env = actor_env(mesh, "x-sink", ASYA_SINK_HOOKS="analyze", ASYA_TRACING="true")
    sink = SinkRuntime(
        ActorConfig.from_env(env),
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=lambda: NOW,
        logger=logging.getLogger("test.x-sink"),
        environ={"_X_AMZN_TRACE_ID": INVOCATION_TRACE},
    )
    done = envelope("t-1", curr="summarize", nxt=[])
    done["status"].update(phase="succeeded", actor="summarize", reason="Completed")
    event = deliver(
        mesh.aws.sqs,
        str(mesh.resources.queue_urls["x-sink"]),
        [done],
        arn=queue_arn(mesh, "x-sink"),
        traces=[RECORD_TRACE],
    )
    assert sink.handle(event, None) == {"batchItemFailures": []}
    [(copy, trace)] = receive_all(mesh.aws.sqs, str(mesh.resources.queue_urls["analyze"]))
    assert "x-asya-sink-hook" in copy["headers"]  # the hook copy (P-SINK-6)
    assert trace == RECORD_TRACE


# -- the transport ----------------------------------------------------------------------------------------------------


def test_p_trace_3_transport_stamps_what_its_trace_header_source_returns_when_the_item_is_prepared(aws: Any) -> None:
    url = aws.sqs.create_queue(QueueName="asya-demo-analyze")["QueueUrl"]
    requests = Requests(aws.sqs)
    current: list[str | None] = [RECORD_TRACE]
    transport = Transport(namespace="demo", sqs=aws.sqs, trace_header=lambda: current[0])
    first = transport.prepare("analyze", Envelope(id="a", route=Route([], "analyze", []), payload=1, status=Status()))
    current[0] = OTHER_RECORD_TRACE
    second = transport.prepare("analyze", Envelope(id="b", route=Route([], "analyze", []), payload=2, status=Status()))
    current[0] = None
    third = transport.prepare("analyze", Envelope(id="c", route=Route([], "analyze", []), payload=3, status=Status()))
    assert all(r.ok for r in transport.send_prepared([first, second, third]))
    entries = requests.messages(url)
    assert [_header(e) for e in entries] == [RECORD_TRACE, OTHER_RECORD_TRACE, None]
    current[0] = INVOCATION_TRACE
    transport.send("analyze", Envelope(id="d", route=Route([], "analyze", []), payload=4, status=Status()))
    got = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
    traces = {json.loads(m["Body"])["id"]: m["Attributes"].get("AWSTraceHeader") for m in got["Messages"]}
    assert traces["d"] == INVOCATION_TRACE
