"""A poison message end to end on in-process moto (PROTOCOL P-ABI-11, P-ACK-5, P-ACK-6, P-ACK-7): the actor crashes
every invocation, so its record is never acked; after ``max_receive_count`` receives SQS moves it to the DLQ, the
task stays non-terminal; ``asya dlq`` shows it and redrives it; once the actor is fixed the task succeeds.

The real pieces: the gateway app (task creation), the sidecar and x-sink runtimes behind the ESM emulator, the DLQ
library and the CLI entry point. The one shortcut: the actor queue's visibility timeout is set to 0 so a crashed
record is visible again at once instead of after P-MAN-4's 90 s. A crashed run keeps its hop claim's lease (P-ACK-8,
R2: the invocation's hard deadline + 10 s), so the actor runs on a clock (``LeaseClock``) the test moves past that
lease before each redelivery, as the wall clock would move on while the message waits (a redelivery within the lease
is held off without a handler call).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.config import ActorConfig
from asya.manifest import Manifest, load_manifest
from asya.sidecar import ActorRuntime
from asya.store import TaskStore
from asya_crew.sink import SinkRuntime
from asya_deploy.environment import actor_environment
from asya_gateway import GatewayConfig, create_app
from asya_local.cli import main
from asya_local.dlq import DeadLetters
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.lambda_event import LambdaContext
from asya_local.provision import MeshResources, provision
from tests.asgi import asgi_client

pytestmark = pytest.mark.functional

POISON = Path(__file__).resolve().parent.parent / "handlers" / "poison"
REGION = "us-east-1"


@dataclass
class LeaseClock:
    """The fragile actor's clock: the wall clock plus what the test skipped."""

    skipped: timedelta = field(default_factory=timedelta)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.skipped

    def skip_lease(self, lambda_timeout: float) -> None:
        """Past a crashed run's lease: its Lambda budget and the 10 s margin (P-ACK-8)."""
        self.skipped += timedelta(seconds=lambda_timeout + 11)


@dataclass
class PoisonMesh:
    manifest: Manifest
    resources: MeshResources
    aws: Any
    gateway: httpx.Client
    store: TaskStore
    fragile: EventSourceMapping
    sink: EventSourceMapping
    receive_counts: list[str]
    clock: LeaseClock

    def create(self, flag: Path) -> str:
        response = self.gateway.post("/api/v1/mesh/?flow=brittle", json={"payload": {"fixed_flag": str(flag)}})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def status(self, task_id: str) -> str:
        view = self.store.get_task(task_id)
        assert view is not None
        return str(view["status"])

    def depth(self, actor: str, *, dlq: bool) -> int:
        url = (self.resources.dlq_urls if dlq else self.resources.queue_urls)[actor]
        attributes = self.aws.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def deliver_fragile(self) -> int:
        """One poll of the fragile actor's queue, once any earlier run's lease has passed."""
        self.clock.skip_lease(self.fragile.config.lambda_timeout)
        return self.fragile.poll_once(wait_seconds=0)

    def crash_into_the_dlq(self) -> None:
        """Deliver until SQS gives up: ``max_receive_count`` crashed invocations, then the move (P-ACK-6)."""
        crashes = self.fragile.stats.crashes
        for _ in range(2):  # max_receive_count of the poison mesh
            assert self.deliver_fragile() == 1
        assert self.fragile.stats.crashes == crashes + 2
        assert self.fragile.poll_once(wait_seconds=0) == 0  # this receive moves the message to the DLQ
        assert self.depth("fragile", dlq=False) == 0
        assert self.depth("fragile", dlq=True) == 1


def _runtime(
    manifest: Manifest, resources: MeshResources, aws: Any, name: str, *, clock: LeaseClock | None = None
) -> Any:
    [actor] = [a for a in manifest.deployed_actors() if a.name == name]
    env = actor_environment(manifest, actor, table=resources.table, bucket=resources.bucket, code_dir=actor.code_dir)
    config = ActorConfig.from_env(env)
    if actor.crew:
        return SinkRuntime(config, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    return ActorRuntime(config, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3, **({"clock": clock} if clock else {}))


@pytest.fixture
def poison(aws: Any) -> Iterator[PoisonMesh]:
    manifest = load_manifest(POISON / "asya.yaml")
    resources = provision(manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3, region=REGION)
    aws.sqs.set_queue_attributes(QueueUrl=resources.queue_urls["fragile"], Attributes={"VisibilityTimeout": "0"})
    clock = LeaseClock()
    fragile_runtime = _runtime(manifest, resources, aws, "fragile", clock=clock)
    receive_counts: list[str] = []

    def fragile_handler(event: dict[str, Any], context: LambdaContext) -> Any:
        receive_counts.extend(record["attributes"]["ApproximateReceiveCount"] for record in event["Records"])
        return fragile_runtime.handle(event, context)

    def esm(name: str, handler: Any) -> EventSourceMapping:
        actor = next(a for a in manifest.deployed_actors() if a.name == name)
        config = EsmConfig(
            function_name=manifest.queue_name(name),
            queue_url=resources.queue_urls[name],
            batch_size=actor.batch_size,
            lambda_timeout=actor.lambda_timeout,
            region=REGION,
        )
        return EventSourceMapping(config, handler, sqs=aws.sqs)

    app = create_app(GatewayConfig(), manifest=manifest, sqs=aws.sqs, dynamodb=aws.dynamodb, s3=aws.s3)
    with asgi_client(app) as gateway:
        yield PoisonMesh(
            manifest=manifest,
            resources=resources,
            aws=aws,
            gateway=gateway,
            store=TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=aws.dynamodb, s3=aws.s3),
            fragile=esm("fragile", fragile_handler),
            sink=esm("x-sink", _runtime(manifest, resources, aws, "x-sink").handle),
            receive_counts=receive_counts,
            clock=clock,
        )


def test_p_ack_5_6_crashing_actor_sends_the_task_to_the_dlq_and_redrive_completes_it(
    poison: PoisonMesh, tmp_path: Path
) -> None:
    flag = tmp_path / "fixed"
    task_id = poison.create(flag)

    poison.crash_into_the_dlq()
    # P-ACK-5: a crash acks nothing, each delivery counts (the same record, receive count 1 then 2)
    assert poison.receive_counts == ["1", "2"]
    assert poison.fragile.stats.deleted == 0
    # P-ACK-6: the task stays non-terminal while its envelope sits in the DLQ
    assert poison.status(task_id) in ("pending", "running")

    dead = DeadLetters(poison.manifest, sqs=poison.aws.sqs, store=poison.store)
    [depth] = dead.depths("fragile")
    assert (depth.dlq, depth.visible, depth.in_flight) == ("asya-poison-fragile-dlq", 1, 0)
    [message] = dead.peek("fragile")
    assert (message.task_id, message.actor, message.phase) == (task_id, "fragile", "pending")
    assert message.receive_count >= 2
    assert message.task_status in ("pending", "running")
    assert "max_receive_count" in message.reason
    assert poison.depth("fragile", dlq=True) == 1
    assert dead.depths("fragile")[0].visible == 1  # the peek put it back

    # redriven while still broken: a fresh receive count buys max_receive_count more deliveries, then the DLQ again
    assert dead.redrive("fragile", method="copy").to_dict() == {
        "actor": "fragile",
        "method": "copy",
        "moved": 1,
        "failed": 0,
        "not_deleted": 0,
        "status": "done",
        "detail": "",
    }
    assert poison.depth("fragile", dlq=True) == 0
    poison.crash_into_the_dlq()
    assert poison.receive_counts == ["1", "2", "1", "2"]

    flag.touch()  # the fix is deployed
    assert dead.redrive("fragile", method="copy").moved == 1
    assert poison.deliver_fragile() == 1
    assert poison.sink.poll_once(wait_seconds=0) == 1
    view = poison.store.get_task(task_id)
    assert view is not None
    assert view["status"] == "succeeded"
    assert view["result"] == {"fixed_flag": str(flag), "handled": True}
    assert poison.depth("fragile", dlq=True) == 0
    assert poison.depth("fragile", dlq=False) == 0


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={}, stdout=out, stderr=err, cwd=Path(__file__).resolve().parent)
    return code, out.getvalue(), err.getvalue()


def test_asya_dlq_cli_lists_shows_and_redrives_the_poison_message(poison: PoisonMesh, tmp_path: Path) -> None:
    """Through the CLI entry point, as against a deployed stack (no endpoint: boto3's AWS endpoints, which the
    in-process moto serves; ``--method copy`` because moto lacks StartMessageMoveTask)."""
    flag = tmp_path / "fixed"
    task_id = poison.create(flag)
    poison.crash_into_the_dlq()
    where = ("--manifest", str(POISON / "asya.yaml"), "--region", REGION)

    code, out, _ = _cli("dlq", "list", *where)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ACTOR", "DLQ", "MESSAGES", "IN", "FLIGHT"]
    assert lines[1].split() == ["fragile", "asya-poison-fragile-dlq", "1", "0"]
    assert {line.split()[0]: line.split()[2] for line in lines[2:]} == {"x-sink": "0", "x-sump": "0"}

    code, out, _ = _cli("dlq", "show", "fragile", "--json", *where)
    assert code == 0
    [shown] = json.loads(out)
    assert shown["task_id"] == task_id and shown["task_status"] in ("pending", "running")

    flag.touch()
    code, out, _ = _cli("dlq", "redrive", "fragile", "--method", "copy", *where)
    assert (code, out) == (0, "redrove 1 message(s) from asya-poison-fragile-dlq to asya-poison-fragile (copy, done)\n")
    assert poison.deliver_fragile() == 1
    assert poison.sink.poll_once(wait_seconds=0) == 1
    assert poison.status(task_id) == "succeeded"

    code, out, _ = _cli("dlq", "list", "fragile", "--json", *where)
    assert (code, json.loads(out)) == (
        0,
        [{"actor": "fragile", "dlq": "asya-poison-fragile-dlq", "visible": 0, "in_flight": 0}],
    )


def test_asya_dlq_cli_errors_are_one_line(poison: PoisonMesh) -> None:
    where = ("--manifest", str(POISON / "asya.yaml"), "--region", REGION)
    code, out, err = _cli("dlq", "show", "nope", *where)
    assert (code, out) == (2, "")
    assert err == "asya: unknown actor 'nope': mesh 'poison' deploys fragile, x-sink, x-sump\n"
    code, _, err = _cli("dlq", "list", "--manifest", str(POISON / "asya.yaml"), "--local")
    assert code == 2
    state = POISON / ".asya" / "dev" / "asya.yaml.json"
    assert err == f"asya: no local mesh: {state} does not exist; start one with `asya dev`\n"
