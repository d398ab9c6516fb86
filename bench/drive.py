"""Tasks driven through the mesh's own code, one component at a time, on whatever AWS clients are given.

:func:`drive` builds the gateway app (``asya_gateway.app.create_app``) and every actor's Lambda runtime as the local
mode builds them (``asya_local.mesh``), creates ``tasks`` tasks with ``POST /api/v1/mesh/?flow=`` (in process, no
socket), then hands each actor the envelopes sent to its queue, in batches of its ``batch_size``, in route order,
until nothing is left: SQS is never received from. Envelopes are taken from the requests themselves (a botocore
``before-parameter-build`` hook on the SQS client), so the same driver runs on :func:`bench.fakes.botocore_client`
clients (nothing is stored: the fast recount of :mod:`bench.vectors`) and on moto's (items are stored, so the meter
bills write units). Timer messages are left alone: the deadline of a task that succeeds finds it terminal.

The event source mapping's own calls (``ReceiveMessage`` and ``DeleteMessageBatch`` per invocation, in the Lambda
service) are not made here; :class:`Drive` reports the invocations so a vector can add them.
"""

from __future__ import annotations

import importlib
import inspect
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from asya import naming
from asya.config import ActorConfig
from asya.manifest import Manifest
from asya_deploy.environment import gateway_environment
from bench.meter import Meter

__all__ = ["Drive", "LambdaContext", "drive", "sqs_event"]

_MAX_ROUNDS: Final = 20


def _still() -> float:
    return 0.0


class LambdaContext:
    """The part of the Lambda context object the runtimes read."""

    memory_limit_in_mb = 256
    aws_request_id = "bench"

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


@dataclass
class Drive:
    """What one drive did: task ids, and per actor its invocations and records."""

    task_ids: list[str] = field(default_factory=list)
    invocations: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)


def sqs_event(messages: Sequence[Mapping[str, Any]], *, queue_arn: str, region: str) -> dict[str, Any]:
    """The SQS event Lambda hands a function for these sent messages (``MessageBody`` and attributes)."""
    records = []
    for message in messages:
        attributes = {
            name: {
                "stringValue": value.get("StringValue"),
                "dataType": value.get("DataType", "String"),
                "stringListValues": [],
                "binaryListValues": [],
            }
            for name, value in (message.get("MessageAttributes") or {}).items()
        }
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": str(uuid.uuid4()),
                "body": message["MessageBody"],
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "0",
                    "SenderId": "bench",
                    "ApproximateFirstReceiveTimestamp": "0",
                },
                "messageAttributes": attributes,
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
        )
    return {"Records": records}


class _Mailbox:
    """Every message sent, by queue name."""

    def __init__(self) -> None:
        self.queues: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def hook(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        queue = str(params.get("QueueUrl", "")).rsplit("/", 1)[-1]
        if model.name == "SendMessage":
            self.queues[queue].append(dict(params))
        elif model.name == "SendMessageBatch":
            self.queues[queue].extend(dict(entry) for entry in params.get("Entries", []))


def drive(
    manifest: Manifest,
    *,
    flow: str,
    payload: Any,
    tasks: int,
    clients: Any,
    resources: Any,
    account_id: str,
    region: str,
    meter: Meter,
) -> Drive:
    """Create ``tasks`` tasks of ``flow`` and run every actor until no envelope is left (see the module docstring);
    ``clients`` has ``sqs``, ``dynamodb`` and ``s3``; ``resources`` is an ``asya_local.provision.MeshResources``."""
    from starlette.testclient import TestClient

    from asya_gateway.app import create_app
    from asya_gateway.config import GatewayConfig
    from asya_local.mesh import runtime_entry_point, runtime_environment

    mailbox = _Mailbox()
    clients.sqs.meta.events.register("before-parameter-build.sqs", mailbox.hook)
    gateway_env = {**gateway_environment(table=resources.table, bucket=resources.bucket), "ASYA_ACCOUNT_ID": account_id}
    app = create_app(
        GatewayConfig.from_env(gateway_env),
        manifest=manifest,
        sqs=clients.sqs,
        dynamodb=clients.dynamodb,
        s3=clients.s3,
    )
    result = Drive()
    with TestClient(app) as http:
        for _ in range(tasks):
            response = http.post("/api/v1/mesh/", params={"flow": flow}, json={"payload": payload})
            if response.status_code != 201:
                raise RuntimeError(f"creating a {flow} task failed: {response.status_code} {response.text}")
            result.task_ids.append(str(response.json()["id"]))
    actors = {actor.name: actor for actor in manifest.deployed_actors()}
    runtimes: dict[str, Any] = {}
    for _ in range(_MAX_ROUNDS):
        delivered = 0
        for name, actor in actors.items():
            queue = manifest.queue_name(name)
            messages = mailbox.queues.pop(queue, [])
            if not messages:
                continue
            if name not in runtimes:
                module, cls = runtime_entry_point(name)
                env = {**runtime_environment(manifest, actor, resources), "ASYA_ACCOUNT_ID": account_id}
                runtime_class = getattr(importlib.import_module(module), cls)
                # the runtime's monotonic clock stands still: frames go out when the batch ends, never early on a
                # slow backend, so the count is the same on moto and in memory
                still = {"monotonic": _still} if "monotonic" in inspect.signature(runtime_class).parameters else {}
                runtimes[name] = runtime_class(
                    ActorConfig.from_env(env), sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3, **still
                )
            arn = f"arn:aws:sqs:{region}:{account_id}:{queue}"
            for start in range(0, len(messages), actor.batch_size):
                batch = messages[start : start + actor.batch_size]
                with meter.process(name):
                    answer = runtimes[name].handle(sqs_event(batch, queue_arn=arn, region=region), LambdaContext(queue))
                if answer and answer.get("batchItemFailures"):
                    raise RuntimeError(f"{name}: records failed: {answer['batchItemFailures']}")
                result.invocations[name] = result.invocations.get(name, 0) + 1
                result.records[name] = result.records.get(name, 0) + len(batch)
                delivered += len(batch)
        if delivered == 0:
            leftover = {q: len(m) for q, m in mailbox.queues.items() if m and not q.endswith(f"-{naming.DEADLINE}")}
            if leftover:
                raise RuntimeError(f"envelopes sent to queues no actor of the manifest reads: {leftover}")
            return result
    raise RuntimeError(f"envelopes still in flight after {_MAX_ROUNDS} rounds")
