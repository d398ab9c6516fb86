"""The HTTP reporter (PROTOCOL P-STAT-18) end to end over real HTTP on loopback: an actor runtime configured with
``ASYA_GATEWAY_URL`` reports to the gateway app (moto behind it) and reads pre-flight from it, and its task store
points at a table that does not exist, so any store read or write would show (the claim would fail the record).

Covered: events and pre-flight over HTTP (the task view shows the progress, then the final status, P-STAT-10,
GW-EVT-1..5); no hop claim (P-ACK-8); the SSRF guard on ``x-asya-gateway-url`` (``file:``, an empty host); a gateway
that is down or hangs changes neither the envelope's outcome nor the handler's time, and the breaker opens after 3
failures; a second loopback server named by an envelope never receives the API key.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from asya import naming
from asya.config import ActorConfig
from asya.httpreport.client import SETTLE_SECONDS, GatewayClient
from asya.manifest import GatewayAuth
from asya.manifest import GatewayConfig as ManifestGateway
from asya.sidecar import ActorRuntime
from asya.store import StatusUpdate
from asya_crew.sink import SinkRuntime
from asya_crew.sump import SumpRuntime
from asya_gateway import GatewayConfig, create_app
from asya_local.lambda_event import sqs_event
from tests.functional.actors import Context, LogLines, actor_env, deliver, drain, envelope, queue_arn
from tests.waiting import wait_for

pytestmark = pytest.mark.functional

API_KEY = "client-key"
REPORTER_KEY = "reporter-key"
#: A table no test creates: the reporting actor must never need the store.
NO_TABLE = "asya-elsewhere-tasks"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Recorder:
    """ASGI middleware keeping ``(method, path, headers)`` of every HTTP request, headers lower-cased."""

    app: Any
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            self.requests.append((scope["method"], scope["path"], headers))
        await self.app(scope, receive, send)

    def paths(self, method: str) -> list[str]:
        return [path for m, path, _ in self.requests if m == method]


async def _elsewhere(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Another host: 404 for reads (no such task), 204 for posts."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    status = 404 if scope["method"] == "GET" else 204
    body = b'{"error": "not found"}' if status == 404 else b""
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


@dataclass
class Setup:
    mesh: Any
    base: str
    recorder: Recorder
    client: httpx.Client
    runtimes: list[ActorRuntime] = field(default_factory=list)

    def create(self, query: str, payload: Any) -> str:
        answer = self.client.post(f"/api/v1/mesh/?{query}", json={"payload": payload})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def view(self, task_id: str) -> dict[str, Any]:
        answer = self.client.get(f"/api/v1/mesh/{task_id}")
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result

    def runtime(self, actor: str = "normalize", handler: str = "sidecar_handlers.echo", **env: str) -> ActorRuntime:
        """An actor runtime with the HTTP reporter; ``env`` overrides (``ASYA_GATEWAY_URL=""`` drops the default)."""
        values = {
            "ASYA_GATEWAY_URL": self.base,
            "ASYA_GATEWAY_API_KEY": API_KEY,
            "ASYA_GATEWAY_REPORTER_KEY": REPORTER_KEY,
            "ASYA_TABLE": NO_TABLE,
            **env,
        }
        config = ActorConfig.from_env({k: v for k, v in actor_env(self.mesh, actor, handler, **values).items() if v})
        runtime = ActorRuntime(config, sqs=self.mesh.aws.sqs, dynamodb=self.mesh.aws.dynamodb, s3=self.mesh.aws.s3)
        self.runtimes.append(runtime)
        return runtime

    def queued(self, actor: str) -> dict[str, Any]:
        """The messages waiting on ``actor``'s queue as one Lambda SQS event."""
        url = str(self.mesh.resources.queue_urls[actor])
        messages = self.mesh.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
        return sqs_event(messages.get("Messages", []), queue_arn=queue_arn(self.mesh, actor), region="us-east-1")

    def inject(self, actor: str, *bodies: dict[str, Any]) -> dict[str, Any]:
        url = str(self.mesh.resources.queue_urls[actor])
        return deliver(self.mesh.aws.sqs, url, list(bodies), arn=queue_arn(self.mesh, actor))

    def drain(self, actor: str) -> list[dict[str, Any]]:
        return drain(self.mesh.aws.sqs, str(self.mesh.resources.queue_urls[actor]))


@pytest.fixture
def setup(mesh: Any, serve_asgi: Any) -> Iterator[Setup]:
    manifest = mesh.manifest.model_copy(
        update={"gateway": ManifestGateway(auth=GatewayAuth(mode="api_key", api_key_secret="asya/demo/api-keys"))}
    )
    app = create_app(
        GatewayConfig.from_env({"ASYA_API_KEYS": API_KEY, "ASYA_REPORTER_KEYS": REPORTER_KEY}),
        manifest=manifest,
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
    )
    recorder = Recorder(app)
    base = serve_asgi(recorder)
    with httpx.Client(base_url=base, headers={"X-API-Key": API_KEY}) as client:
        done = Setup(mesh=mesh, base=base, recorder=recorder, client=client)
        yield done
        for runtime in done.runtimes:
            if runtime.http_reporter is not None:  # a store reporter's runtime has no gateway to close
                runtime.http_reporter.gateway.close(timeout=0.2)


def _handled(runtime: ActorRuntime, event: dict[str, Any]) -> tuple[list[dict[str, str]], float]:
    started = time.monotonic()
    response = runtime.handle(event, Context())
    return response["batchItemFailures"], time.monotonic() - started


def _fly_values(setup: Setup, task_id: str, count: int) -> list[Any]:
    """The first ``count`` FLY events of the task's SSE stream (GW-SSE), as their data objects."""
    values: list[Any] = []
    event = ""
    with setup.client.stream("GET", f"/api/v1/mesh/{task_id}/events", timeout=10) as stream:
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "fly":
                values.append(json.loads(line[5:]))
                if len(values) == count:
                    break
    return values


def _sump(mesh: Any) -> SumpRuntime:
    config = ActorConfig.from_env(actor_env(mesh, naming.SUMP))
    return SumpRuntime(config, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)


def _sink(mesh: Any) -> SinkRuntime:
    config = ActorConfig.from_env(actor_env(mesh, naming.SINK))
    return SinkRuntime(config, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3)


def test_p_stat_18_progress_and_final_status_over_http_with_preflight_read(setup: Setup) -> None:
    """The actor reads pre-flight with GET (P-STAT-10), posts ``processing`` (progress 50 on a one-actor route,
    P-STAT-8) and its FLY values (GW-EVT-4) with ``X-Asya-Envelope-ID`` and the API key, claims nothing (P-ACK-8), and
    x-sink's final write makes the view ``succeeded``; the actor never touches the store (its table does not exist)."""
    task_id = setup.create("actor=normalize", {"text": "Hello"})
    runtime = setup.runtime(handler="sidecar_handlers.stream_fly")
    failures, _ = _handled(runtime, setup.queued("normalize"))
    assert failures == []

    running = wait_for(
        lambda: (v := setup.view(task_id))["step"] == "processing" and v, "the processing event over HTTP", 10
    )
    assert (running["status"], running["current_actor"], running["progress_percent"]) == ("running", "normalize", 50)
    assert "fence_h" not in running  # no hop claim: nothing but the producer route wrote
    wait_for(lambda: setup.view(task_id)["last_event_id"] >= 4, "the two FLY values", 10)
    reads = [h for m, p, h in setup.recorder.requests if m == "GET" and p == f"/api/v1/mesh/{task_id}"]
    posts = [h for m, p, h in setup.recorder.requests if m == "POST" and p == f"/api/v1/mesh/{task_id}/events"]
    assert len(posts) == 3  # processing + two FLY values
    for headers in [reads[0], *posts]:
        assert headers["x-asya-envelope-id"] == task_id
    # reads carry the client key, posts the reporter key only (GW-EVT-1 R3)
    assert reads[0]["x-api-key"] == API_KEY and "x-asya-reporter-key" not in reads[0]
    assert all(h["x-asya-reporter-key"] == REPORTER_KEY and "x-api-key" not in h for h in posts)
    flown = _fly_values(setup, task_id, 2)  # GW-EVT-4: no actor, the task id as envelope id
    assert flown == [{"payload": {"partial": n}, "actor": None, "envelope_id": task_id} for n in (1, 2)]

    sunk = setup.drain(naming.SINK)
    assert [e["status"]["phase"] for e in sunk] == ["succeeded"]
    _sink(setup.mesh).handle(setup.inject(naming.SINK, *sunk), Context())
    final = setup.view(task_id)
    assert (final["status"], final["progress_percent"], final["result"]) == (
        "succeeded",
        100,
        {"text": "Hello", "done": True},
    )


def test_p_sump_6_r3_x_sump_fails_the_task_of_an_http_reporter_infrastructure_error(setup: Setup) -> None:
    """A handler that cannot load (P-ABI-2) in an actor that reports over HTTP: ``failed`` is the crew's (GW-EVT-3
    R3), so the reporter posts no final status; its x-sump envelope says so, and x-sump writes the final ``failed``
    with its checkpoint (P-SUMP-6 R3). Before, the task (created without a timeout) stayed ``running`` for ever."""
    task_id = setup.create("actor=normalize", {"text": "x"})
    runtime = setup.runtime(handler="no_such_module.handler")
    failures, _ = _handled(runtime, setup.queued("normalize"))
    assert failures == []
    assert runtime_flush(runtime)
    assert not [p for m, p, _ in setup.recorder.requests if m == "POST" and p.endswith("/events")]
    assert setup.view(task_id)["status"] in ("pending", "running")
    sumped = setup.drain(naming.SUMP)
    assert [(e["id"], e["status"]["reason"]) for e in sumped] == [(task_id, "HandlerLoadError")]
    response = _sump(setup.mesh).handle(setup.inject(naming.SUMP, *sumped), Context())
    assert response["batchItemFailures"] == []
    final = setup.view(task_id)
    assert (final["status"], final["error_details"]["type"]) == ("failed", "HandlerLoadError")
    assert "no_such_module" in final["error"]
    assert final["checkpoint_key"].startswith("failed/"), "the line and the status are one write"


def test_p_sump_6_r3_a_lost_child_frame_of_an_http_reporter_does_not_fail_the_task(setup: Setup) -> None:
    """P-FAN-6: a child frame with an unknown destination reaches x-sump, which must not fail the task for it (the
    x-sump envelope carries the task's id, but no ``final_by``)."""
    task_id = setup.create("flow=text-pipeline", {"text": "x"})
    runtime = setup.runtime(handler="sidecar_handlers.child_to_ghost")
    assert _handled(runtime, setup.queued("normalize"))[0] == []
    [sumped] = setup.drain(naming.SUMP)
    assert (sumped["id"], sumped["status"]["reason"]) == (task_id, "UnknownActor")
    assert "final_by" not in sumped["status"]["error"]
    assert _sump(setup.mesh).handle(setup.inject(naming.SUMP, sumped), Context())["batchItemFailures"] == []
    assert [e["id"] for e in setup.drain("analyze")] == [task_id]
    assert setup.view(task_id)["status"] in ("pending", "running")


def test_p_sump_6_r3_a_store_reporter_s_x_sump_envelope_leaves_the_final_write_to_the_layer(setup: Setup) -> None:
    """The same error in an actor that writes to the store: its layer writes ``failed`` (P-ERR-6), and its x-sump
    envelope does not ask x-sump to (x-sump only attaches its checkpoint, P-STAT-2)."""
    task_id = setup.create("actor=normalize", {"text": "x"})
    runtime = setup.runtime(
        handler="no_such_module.handler",
        ASYA_GATEWAY_URL="",
        ASYA_GATEWAY_API_KEY="",
        ASYA_GATEWAY_REPORTER_KEY="",
        ASYA_REPORTER="store",
        ASYA_TABLE=setup.mesh.resources.table,
    )
    assert _handled(runtime, setup.queued("normalize"))[0] == []
    [sumped] = setup.drain(naming.SUMP)
    assert "final_by" not in sumped["status"]["error"]
    assert setup.view(task_id)["status"] == "failed"


def test_p_stat_10_over_http_a_canceled_task_goes_to_x_sink_without_a_call(setup: Setup) -> None:
    task_id = setup.create("actor=normalize", {"text": "x"})
    assert setup.client.delete(f"/api/v1/mesh/{task_id}").status_code == 204
    failures, _ = _handled(setup.runtime(handler="reporter_handlers.chatty"), setup.queued("normalize"))
    assert failures == []
    sunk = setup.drain(naming.SINK)
    assert [(e["status"]["phase"], e["status"]["reason"]) for e in sunk] == [("canceled", "PreFlightCanceled")]
    assert setup.drain("analyze") == []


def test_p_stat_10_over_http_a_finished_root_is_a_duplicate(setup: Setup) -> None:
    task_id = setup.create("flow=text-pipeline", {"text": "x"})
    body = setup.queued("normalize")
    store = setup.mesh.store(lambda: datetime.now(UTC))
    assert store.apply(task_id, StatusUpdate(status="succeeded", result=1)).accepted  # x-sink's write
    failures, _ = _handled(setup.runtime(), body)
    assert failures == []
    assert setup.drain("analyze") == [] and setup.drain(naming.SINK) == []


def test_p_stat_19_detailed_progress_and_retrying_are_posted(setup: Setup) -> None:
    """Progress ``detailed``: ``received``, ``processing`` and ``completed`` (P-STAT-8: 33.3 at the first of three
    actors); a scheduled retry posts ``retrying`` with its attempt and delay (P-STAT-5)."""
    task_id = setup.create("flow=text-pipeline", {"text": "x"})
    body = json.loads(setup.queued("normalize")["Records"][0]["body"])
    setup.drain("normalize")
    detailed = {**body, "headers": {**body["headers"], "x-asya-progress": "detailed"}}
    runtime = setup.runtime()
    assert _handled(runtime, setup.inject("normalize", detailed))[0] == []
    assert runtime_flush(runtime)
    steps = [h for m, p, h in setup.recorder.requests if m == "POST" and p == f"/api/v1/mesh/{task_id}/events"]
    assert len(steps) == 3
    view = setup.view(task_id)
    assert (view["step"], view["progress_percent"], view["current_actor"]) == ("completed", 33.3, "normalize")

    retried = setup.create("flow=text-pipeline", {"text": "y"})
    policy = {"policies": {"default": {"max_attempts": 3, "initial_delay": 0, "jitter": False}}}
    failing = setup.runtime(handler="sidecar_handlers.boom", ASYA_RESILIENCY=json.dumps(policy))
    assert _handled(failing, setup.queued("normalize"))[0] == []
    assert runtime_flush(failing)
    view = setup.view(retried)
    assert (view["status"], view["step"], view["data"]["attempt"]) == ("running", "retrying", 2)


def test_p_stat_18_a_full_queue_drops_posts_without_waiting(hanging_base: str, caplog: Any) -> None:
    """Posts never block the caller: against a gateway that hangs, a queue of 2 takes 50 posts at once, drops the
    rest and says so once per burst of drops."""
    from asya.httpreport import GatewayClient

    gateway = GatewayClient(logger=logging.getLogger("test.reporter"), queue_size=2)
    posted = threading.Event()

    def post_all() -> None:
        for _ in range(50):
            gateway.post(hanging_base, "task", "task", b"{}")
        posted.set()

    with caplog.at_level(logging.WARNING, logger="test.reporter"):
        threading.Thread(target=post_all, daemon=True).start()
        # a post that blocked would wait for a queue slot, freed only by a post timing out (5 s each): the 47 posts
        # past the queue would hold the thread some 235 s, so a bound of 60 s tells blocking from a slow box
        assert posted.wait(timeout=60.0), "posts to a hanging gateway blocked their caller"
    # The sender thread takes the first post off the queue (and hangs on it) at some point during the 50 calls: before
    # the queue fills (one burst of drops) or after some drops (one post fits again, then a second burst). A warning
    # per dropped event would be 46 or more.
    assert 1 <= [r.message for r in caplog.records].count("reporter queue full: events dropped") <= 2
    gateway.close(timeout=0.1)


@pytest.mark.parametrize("named", ["file:///etc/passwd", "http:///no-host", "https://", "ftp://example.com/", 7])
def test_p_stat_18_refused_gateway_header_falls_back_to_the_configured_gateway(setup: Setup, named: Any) -> None:
    """SSRF guard: a header that is not an absolute http(s) URL with a host is ignored (logged); the reports go to
    ``ASYA_GATEWAY_URL``."""
    task_id = setup.create("actor=normalize", {"text": "x"})
    event = setup.queued("normalize")
    body = json.loads(event["Records"][0]["body"])
    body["headers"]["x-asya-gateway-url"] = named
    setup.drain("normalize")
    runtime = setup.runtime()
    with LogLines(_as_harness(runtime)) as logs:
        failures, _ = _handled(runtime, setup.inject("normalize", body))
    assert failures == []
    assert logs.named("x-asya-gateway-url refused: not an absolute http(s) URL with a host")
    wait_for(lambda: setup.view(task_id)["step"] == "processing", "the processing event at the configured gateway", 10)


def test_p_stat_18_refused_header_and_no_configured_gateway_means_no_reporting(setup: Setup) -> None:
    """``ASYA_REPORTER=http`` without ``ASYA_GATEWAY_URL``: an envelope whose header is refused reports nowhere and is
    handled as usual."""
    task_id = setup.create("actor=normalize", {"text": "x"})
    body = json.loads(setup.queued("normalize")["Records"][0]["body"])
    body["headers"]["x-asya-gateway-url"] = "file:///etc/passwd"
    setup.drain("normalize")
    before = len(setup.recorder.requests)
    runtime = setup.runtime(
        ASYA_REPORTER="http", ASYA_GATEWAY_URL="", ASYA_GATEWAY_API_KEY="", ASYA_GATEWAY_REPORTER_KEY=""
    )
    failures, _ = _handled(runtime, setup.inject("normalize", body))
    assert failures == []
    assert [e["status"]["phase"] for e in setup.drain(naming.SINK)] == ["succeeded"]
    assert runtime_flush(runtime)
    assert len(setup.recorder.requests) == before
    assert setup.view(task_id)["status"] == "pending"


def test_p_stat_18_another_host_named_by_the_envelope_never_gets_the_api_key(setup: Setup, serve_asgi: Any) -> None:
    """An envelope naming a second loopback server: reads and posts go there with the envelope id, never with the
    key; a base with the configured gateway's origin (another path) does get it."""
    other = Recorder(_elsewhere)
    other_base = serve_asgi(other)
    task_id = setup.create("actor=normalize", {"text": "x"})
    body = json.loads(setup.queued("normalize")["Records"][0]["body"])
    setup.drain("normalize")
    foreign = {**body, "headers": {**body["headers"], "x-asya-gateway-url": other_base + "/"}}
    runtime = setup.runtime(handler="sidecar_handlers.stream_fly")
    assert _handled(runtime, setup.inject("normalize", foreign))[0] == []
    assert runtime_flush(runtime)
    assert other.paths("GET") == [f"/api/v1/mesh/{task_id}"]
    assert other.paths("POST") == [f"/api/v1/mesh/{task_id}/events"] * 3
    for _, _, headers in other.requests:
        assert headers["x-asya-envelope-id"] == task_id
        assert "x-api-key" not in headers and "x-asya-reporter-key" not in headers
    assert not [p for _, p, _ in setup.recorder.requests if p.endswith("/events")]

    same_origin = {**body, "headers": {**body["headers"], "x-asya-gateway-url": setup.base + "/"}}
    assert _handled(runtime, setup.inject("normalize", same_origin))[0] == []
    assert runtime_flush(runtime)
    posts = [h for m, p, h in setup.recorder.requests if m == "POST" and p.endswith("/events")]
    assert posts and all(h["x-asya-reporter-key"] == REPORTER_KEY for h in posts)


@pytest.fixture
def hanging_base() -> Iterator[str]:
    """A loopback port whose connections are accepted by the kernel and never answered."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def down_base() -> str:
    """A loopback port nothing listens on: connections are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("gateway", ["down_base", "hanging_base"])
def test_p_stat_18_a_gateway_down_or_hanging_changes_neither_outcome_nor_handler_time(
    setup: Setup, gateway: str, request: pytest.FixtureRequest
) -> None:
    """The frame leaves as without a reporter and nothing fails; the handler, which streams FLY values while it runs,
    waits on the reporter at most once per stall of the gateway, for at most SETTLE_SECONDS (100 ms), and every
    other wait of the call returns without blocking. Checked by what the layer waited on, not by a clock: the
    100 ms bound itself is ``GatewayClient.flush``'s deadline, measured in ``make bench``."""
    base = request.getfixturevalue(gateway)
    env = envelope(curr="normalize", nxt=["analyze"], deadline=None, headers={})
    runtime = setup.runtime(handler="reporter_handlers.chatty", ASYA_GATEWAY_URL=base, ASYA_GATEWAY_API_KEY="")
    waits = _record_waits(runtime_gateway(runtime))
    failures, _ = _handled(runtime, setup.inject("normalize", env))
    assert failures == []
    frames = setup.drain("analyze")
    assert [f["id"] for f in frames] == [env["id"]]
    assert frames[0]["payload"]["text"] == env["payload"]["text"]
    blocking = [timeout for timeout, drained in waits if not drained]
    assert waits, "the call's FLY flushes never settled the reporter"
    # a refused connection fails its posts at once, so the queue may drain; a hanging gateway stalls it once
    expected = [SETTLE_SECONDS] if gateway == "hanging_base" else blocking[:1]
    assert blocking == expected, f"the handler waited on an unreachable gateway {len(blocking)} times: {waits}"
    assert all(timeout <= SETTLE_SECONDS for timeout, _ in waits)


def _record_waits(gateway: GatewayClient) -> list[tuple[float, bool]]:
    """Record each wait the reporter's client does for its queue (``flush``: timeout, drained) on this instance."""
    waits: list[tuple[float, bool]] = []
    flush = gateway.flush

    def recorded(timeout: float) -> bool:
        drained = flush(timeout)
        waits.append((timeout, drained))
        return drained

    gateway.flush = recorded  # type: ignore[method-assign]
    return waits


def test_p_stat_18_breaker_opens_after_three_failures_and_skips_the_gateway(setup: Setup, down_base: str) -> None:
    runtime = setup.runtime(handler="reporter_handlers.chatty", ASYA_GATEWAY_URL=down_base, ASYA_GATEWAY_API_KEY="")
    env = envelope(curr="normalize", nxt=["analyze"], deadline=None, headers={})
    with LogLines(_as_harness(runtime)) as logs:
        assert _handled(runtime, setup.inject("normalize", env))[0] == []
        assert runtime_flush(runtime)
        opened = logs.named("gateway unreachable: reporting to it paused")
    assert len(opened) == 1  # once: the later posts were dropped without a try
    assert runtime_gateway(runtime).breaker_open(down_base)


def runtime_gateway(runtime: ActorRuntime) -> Any:
    reporter = runtime.http_reporter
    assert reporter is not None
    return reporter.gateway


def runtime_flush(runtime: ActorRuntime, timeout: float = 10.0) -> bool:
    """Wait for the runtime's queued posts to leave."""
    flushed: bool = runtime_gateway(runtime).flush(timeout)
    return flushed


@dataclass
class _RuntimeOnly:
    runtime: ActorRuntime


def _as_harness(runtime: ActorRuntime) -> Any:
    """``LogLines`` reads only ``h.runtime``."""
    return _RuntimeOnly(runtime)
