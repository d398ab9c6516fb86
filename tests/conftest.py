"""Shared fixtures: in-process moto (``mock_aws``), boto3 clients, the example manifest and a provisioned mesh.

Tests never touch ``os.environ`` by hand: AWS credentials and region reach boto3 through ``monkeypatch`` here, and
runtime configuration is built from explicit mappings (``ActorConfig.from_env({...})``). The one process-wide setting,
made in :func:`pytest_configure` before any CDK import, is the Makefile's: jsii's Node 20 end-of-life banner is off.
The garbage collector runs at higher thresholds and skips the objects that live for the whole test process
(:func:`pytest_collection_finish`): CPU only, no test sees a difference.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from asya.manifest import Manifest, load_manifest
from asya_local.provision import MeshResources
from asya_local.serving import UvicornThread
from tests.sharedmoto import SharedMoto

REPO = Path(__file__).resolve().parent.parent
REGION = "us-east-1"
#: jsii's end-of-life notice, silenced for these Node major versions only (the Makefile sets the same default).
_JSII_EOL_SILENCE = ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def pytest_configure(config: pytest.Config) -> None:
    """Before collection imports ``aws_cdk`` (which starts jsii's Node process, inheriting this environment). A value
    the caller set wins, so the notice can be brought back."""
    os.environ.setdefault(*_JSII_EOL_SILENCE)


#: The garbage collector's thresholds in a test process: a young collection after 10,000 net allocations (700 by
#: default), an older one after 20 of those. A test allocates in bursts of millions (moto's requests and answers), and
#: at the default thresholds the collector ran a thousand times a module and found little: nearly all of it is freed
#: by reference counting.
_GC_THRESHOLDS = (10_000, 20, 20)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported lives until the end: see :func:`_freeze_long_lived_heap`."""
    gc.set_threshold(*_GC_THRESHOLDS)
    _freeze_long_lived_heap()


def _freeze_long_lived_heap() -> None:
    """Move every object alive now out of the cyclic garbage collector's reach (``gc.freeze``). A full collection
    walks the whole heap, and most of it is modules, service models and moto's backends that live as long as the
    worker: frozen, they are no longer walked at each full collection (a fifth of a moto test's CPU went to them).
    Garbage is collected first, so only live objects are frozen."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _no_event_loop_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test must not leave an event loop registered as running on the main thread: every later test that runs one
    (async handlers, ``asyncio.run``) would fail with "Cannot run the event loop while another loop is running". The
    browser tier's Playwright keeps one running until its module ends (``tests/browser/conftest.py``)."""
    yield
    if request.node.get_closest_marker("browser") is not None:
        return
    leaked = asyncio._get_running_loop()
    if leaked is not None:
        asyncio.events._set_running_loop(None)  # let the following tests run, then say which test leaked it
        pytest.fail(f"the test left an event loop running on the main thread: {leaked!r}")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region so boto3 can never reach a real account."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


class AwsClients:
    """A test's boto3 clients of the worker's session, each made when the test first asks for it (a client costs
    some milliseconds to make, and many tests use one or two of the three)."""

    def __init__(self, session: boto3.Session) -> None:
        self.session = session

    @functools.cached_property
    def sqs(self) -> Any:
        return self.session.client("sqs")

    @functools.cached_property
    def dynamodb(self) -> Any:
        return self.session.client("dynamodb")

    @functools.cached_property
    def s3(self) -> Any:
        return self.session.client("s3")


@pytest.fixture(scope="session")
def _shared_moto() -> Iterator[SharedMoto]:
    """This worker's moto: its boto3 session and the example mesh provisioned in it (``tests/sharedmoto.py``)."""
    shared = SharedMoto(region=REGION)
    yield shared
    shared.close()


@pytest.fixture
def _mesh_kept(_shared_moto: SharedMoto) -> SharedMoto:
    """Asked for by ``mesh`` only: its presence among a test's fixtures tells ``aws`` to keep moto's data."""
    return _shared_moto


@pytest.fixture
def aws(aws_env: None, _shared_moto: SharedMoto, request: pytest.FixtureRequest) -> Iterator[AwsClients]:
    """In-process moto with one set of clients, new for each test. Under ``mesh`` moto keeps the worker's mesh
    (reset by ``mesh``); otherwise it starts empty, as ``with mock_aws():`` does."""
    with _shared_moto.mocked(keep="_mesh_kept" in request.fixturenames):
        yield AwsClients(_shared_moto.boto3_session())
    if not _shared_moto.heap_frozen:
        # the first test on moto loaded its backends and botocore's service models, which the worker keeps
        _shared_moto.heap_frozen = True
        _freeze_long_lived_heap()


@pytest.fixture(scope="session")
def example_manifest() -> Manifest:
    """The repository's example ``asya.yaml``."""
    return load_manifest(REPO / "asya.yaml")


@dataclass
class Mesh:
    manifest: Manifest
    resources: MeshResources
    aws: AwsClients

    def store(self, clock: Any) -> Any:
        """A ``TaskStore`` over this mesh's table and bucket, on ``clock``."""
        from asya.store import TaskStore

        return TaskStore(
            table=self.resources.table,
            bucket=self.resources.bucket,
            dynamodb=self.aws.dynamodb,
            s3=self.aws.s3,
            clock=clock,
        )


@pytest.fixture
def mesh(aws: AwsClients, example_manifest: Manifest, _mesh_kept: SharedMoto) -> Mesh:
    """The example mesh's queues, DLQs, table and bucket in moto: provisioned once per worker, and before each test
    returned to that state (no message, item or object; see ``tests/sharedmoto.py``)."""
    resources = _mesh_kept.reset_mesh(example_manifest, aws)
    return Mesh(manifest=example_manifest, resources=resources, aws=aws)


@pytest.fixture
def serve_asgi() -> Iterator[Any]:
    """``serve(app) -> base_url``: runs an ASGI app with uvicorn in a thread on 127.0.0.1 (a free port) until the
    test ends, so tests can talk real HTTP (and read streamed responses as they are written) with ``httpx``. A test
    that reads whole responses calls the app in-process instead (``tests.asgi.asgi_client``: no server to start)."""
    servers: list[UvicornThread] = []

    def serve(app: Any) -> str:
        server = UvicornThread(app, name="test-asgi", grace_seconds=1, lifespan="off")
        server.start()
        servers.append(server)
        return server.url

    yield serve
    for server in servers:
        server.stop()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """A file path a test actor waits for (a payload's ``gate``): the task stays in that actor until the test creates
    the file, and at the latest when the test ends, so the actor's poller is free for the tests that follow. Tests
    release the task once they have seen what they wait for, never after a fixed time."""
    path = tmp_path / "gate"
    yield path
    path.touch()
