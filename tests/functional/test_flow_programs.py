"""Flow programs kept by digest (P-FLOWV-1..4) against moto: the gateway keeps the program a task starts with, and an
actor that does not hold a task's program reads it from the bucket in its pre-flight, or fails the task at once with
``FlowVersionMissing`` when it is nowhere; a failed read fails the record (SQS delivers it again)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from asya.flows import STATE_HEADER, Program, compile_flow
from asya.programstore import ProgramStore, ProgramStoreError
from asya.tableschema import program_key
from asya_gateway import GatewayConfig, create_app
from tests.clocks import ManualClock
from tests.functional.actors import NOW, Harness, envelope

pytestmark = pytest.mark.functional

PROBE = """
async def probe(state):
    state = await normalize(state)
    state["version"] = {version}
    state = await analyze(state)
    return state
"""


def _program(version: int) -> Program:
    return compile_flow(
        PROBE.format(version=version), flow="probe", filename="probe.py", actors={"normalize", "analyze"}
    )


def _at_normalize(program: Program) -> dict[str, Any]:
    """An envelope of a task of ``program`` at its first call, ``normalize``, the last of its route segment."""
    env = envelope("t-probe", nxt=[])
    env["headers"] = {STATE_HEADER: {"flow": "probe", "pc": 1, "owner": "t-probe", "digest": program.digest}}
    return env


@pytest.fixture
def harness(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str = "echo", **kwargs: Any) -> Harness:
        return Harness(mesh, handler, clock=lambda: NOW, **kwargs)

    return make


def _keep(mesh: Any, program: Program) -> None:
    ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3).publish(program)


def test_an_actor_reads_the_program_of_the_digest_and_runs_it(mesh: Any, harness: Callable[..., Harness]) -> None:
    v1, v2 = _program(1), _program(2)
    _keep(mesh, v1)
    h = harness(env={"ASYA_FLOWS": json.dumps({"probe": v2.to_json()})})  # this deployment holds v2
    _, failed = h.run(_at_normalize(v1))
    assert failed == []
    [out] = h.drain("analyze")
    assert out["payload"]["version"] == 1  # v1's set ran, not v2's
    assert out["headers"][STATE_HEADER]["digest"] == v1.digest
    assert out["headers"][STATE_HEADER]["pc"] == 3


def test_an_actor_with_no_program_of_the_flow_still_finishes_an_old_tasks_hop(
    mesh: Any, harness: Callable[..., Harness]
) -> None:
    """An actor dropped from a flow by a later deploy holds none of its programs: it reads the task's."""
    v1 = _program(1)
    _keep(mesh, v1)
    _, failed = harness().run(_at_normalize(v1))
    assert failed == []
    [out] = harness().drain("analyze")
    assert out["payload"]["version"] == 1


def test_a_program_nowhere_fails_the_task_at_once_naming_flow_and_digest(
    mesh: Any, harness: Callable[..., Harness]
) -> None:
    v1, v2 = _program(1), _program(2)
    h = harness("boom", env={"ASYA_FLOWS": json.dumps({"probe": v2.to_json()})})  # boom: the handler ran
    _, failed = h.run(_at_normalize(v1))
    assert failed == []
    assert h.drain("analyze") == []
    [out] = h.drain("x-sink")
    assert out["status"]["phase"] == "failed"
    error = out["status"]["error"]
    assert error["type"] == "asya.flows.versions.FlowVersionMissingError"
    assert "'probe'" in error["message"] and v1.digest in error["message"]


def test_a_program_whose_bytes_do_not_match_its_digest_is_not_run(mesh: Any, harness: Callable[..., Harness]) -> None:
    v1, v2 = _program(1), _program(2)
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=program_key(v1.digest), Body=v2.canonical())
    _, failed = harness().run(_at_normalize(v1))
    assert failed == []
    assert harness().drain("analyze") == []
    [out] = harness().drain("x-sink")
    assert out["status"]["error"]["type"] == "asya.flows.versions.FlowVersionMissingError"


class _ThrottledReads:
    """The mesh's S3 client, whose reads of ``flows/`` are throttled (S3's ``SlowDown``)."""

    def __init__(self, s3: Any) -> None:
        self._s3 = s3

    def get_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"].startswith("flows/"):
            raise ClientError(
                {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}}, "GetObject"
            )
        return self._s3.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)


def test_a_throttled_program_read_fails_the_record_and_nothing_leaves(
    mesh: Any, harness: Callable[..., Harness]
) -> None:
    v1 = _program(1)
    _keep(mesh, v1)
    h = harness(s3=_ThrottledReads(mesh.aws.s3))
    _, failed = h.run(_at_normalize(v1))
    assert failed == ["0"]
    assert h.drain("analyze") == []
    assert h.drain("x-sink") == []


def test_the_store_writes_once_and_tells_missing_from_failed(mesh: Any) -> None:
    v1 = _program(1)
    first = ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3)
    assert first.fetch(v1.digest) is None
    first.publish(v1)
    body = mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=program_key(v1.digest))["Body"].read()
    assert body == v1.canonical()
    ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3).publish(v1)  # another container: 412, kept as it is
    fetched = ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3).fetch(v1.digest)
    assert fetched is not None and fetched.digest == v1.digest
    with pytest.raises(ProgramStoreError) as raised:
        ProgramStore(bucket=mesh.resources.bucket, s3=_ThrottledReads(mesh.aws.s3)).fetch(v1.digest)
    assert raised.value.code == "SlowDown"


# ---------------------------------------------------------------- the gateway keeps what it starts


@pytest.fixture
def client(mesh: Any, serve_asgi: Any) -> Iterator[Callable[[Any], httpx.Client]]:
    clients: list[httpx.Client] = []

    def make(s3: Any) -> httpx.Client:
        clock = ManualClock(datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
        app = create_app(
            GatewayConfig(), manifest=mesh.manifest, store=mesh.store(clock), sqs=mesh.aws.sqs, s3=s3, clock=clock
        )
        clients.append(httpx.Client(base_url=serve_asgi(app)))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


def test_a_created_task_carries_the_digest_of_a_program_the_bucket_keeps(
    mesh: Any, client: Callable[[Any], httpx.Client]
) -> None:
    program = mesh.manifest.flows["triage"].program
    response = client(mesh.aws.s3).post("/api/v1/mesh/?flow=triage", json={"payload": {"text": "good"}})
    assert response.status_code == 201, response.text
    kept = mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=program_key(program.digest))["Body"].read()
    assert kept == program.canonical()
    [first] = [json.loads(m["Body"]) for m in _received(mesh, program.initial_route[0])]
    assert first["headers"][STATE_HEADER]["digest"] == program.digest


class _ThrottledWrites(_ThrottledReads):
    def put_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"].startswith("flows/"):
            raise ClientError(
                {"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}}, "PutObject"
            )
        return self._s3.put_object(**kwargs)


def test_a_program_the_gateway_cannot_keep_creates_nothing(mesh: Any, client: Callable[[Any], httpx.Client]) -> None:
    response = client(_ThrottledWrites(mesh.aws.s3)).post("/api/v1/mesh/?flow=triage", json={"payload": {"text": "x"}})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert "triage" in response.json()["error"]
    program = mesh.manifest.flows["triage"].program
    assert _received(mesh, program.initial_route[0]) == []


def _received(mesh: Any, actor: str) -> list[dict[str, Any]]:
    url = mesh.resources.queue_urls[actor]
    return list(mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))
