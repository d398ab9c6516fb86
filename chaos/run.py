"""One chaos run: a fresh local mesh of ``chaos/mesh/asya.yaml``, one :class:`Scenario` (fault rates and a task
count) played on it, the history recorded and checked.

Order: start the mesh (moto's server child, pollers, backstop, gateway on a free port); shorten the user actors'
queue visibility timeouts to ``lease + 5 s`` (``SetQueueAttributes``; P-MAN-4 deploys ``6 x`` the Lambda timeout,
which would only make each crash's redelivery wait longer); attach the :class:`~chaos.faults.Injector` to the
mesh's clients and activate the actor wrappers; run the :class:`~chaos.workload.Workload` (with the forged-status
fault's :class:`~chaos.forgery.Forger` on each creation); stop injecting; send the late child copies the
``late_child_copy`` fault kept (every task has ended by then); wait
until every queue is empty (``settle_seconds`` at most, and never less than one visibility timeout plus one lease: a
record that crashed just before the faults stopped comes back after its visibility timeout, and may then be held
until another copy's lease ends); read the final views, the dead letters and every checkpoint
object; stop the mesh; check.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from asya import naming
from asya.manifest import Manifest, load_manifest
from asya_gateway.config import GATEWAY_ENV
from asya_local.mesh import LocalMesh
from asya_local.moto_server import make_clients
from chaos import actors
from chaos.checker import DeadLetter, History, check, duplicate_runs, runs_across_end, runs_after_lease
from chaos.faults import FaultRates, Injector
from chaos.forgery import Forger
from chaos.restarts import GatewayRestarter
from chaos.workload import Recorder, Workload, plan_tasks

__all__ = ["MESH_MANIFEST", "Scenario", "ScenarioResult", "run_scenario"]

MESH_MANIFEST: Final = Path(__file__).resolve().parent / "mesh" / "asya.yaml"
#: Lambda's lease margin past the invocation's hard deadline (P-ACK-8), plus a few seconds.
_LEASE_SLACK_SECONDS: Final = 10
_VISIBILITY_SLACK_SECONDS: Final = 5
#: The pollers' long-poll wait. The chaos mesh runs some thirty pollers (three per actor) and spends most of a run
#: waiting for redeliveries: at the local mode's 1 s, their empty receives were most of the run's CPU. A long poll
#: returns as soon as a message arrives, so only the mesh's stop, once per run, waits longer.
_POLL_WAIT_SECONDS: Final = 5


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    rates: FaultRates
    tasks: int


@dataclass
class ScenarioResult:
    scenario: Scenario
    seconds: float
    tasks: int
    outcomes: Counter[str]
    played: Counter[str]
    observed: Counter[str]
    handler_calls: int
    duplicate_runs: int
    runs_after_lease: int
    dead_letters: int
    sse_events: int
    get_reads: int
    #: Requests sent again after no HTTP answer, and SSE streams resumed with ``Last-Event-ID`` (gateway restarts).
    client_retries: int = 0
    sse_resumes: int = 0
    #: Of the retries, creations cut after they were sent (sent again with their Idempotency-Key, GW-CREATE-R3-6).
    ambiguous_creates: int = 0
    #: Late child copies sent once every task had ended, and the handler runs they caused (each a violation).
    late_copies: int = 0
    #: Handler runs of records received before their task ended that started after it (the documented window).
    runs_across_end: int = 0
    #: Forged producer posts sent, and crew SETs played.
    forged_posts: int = 0
    crew_sets: int = 0
    layer_sets: int = 0
    violations: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(self.violations.values()) and not self.errors


def run_scenario(
    scenario: Scenario,
    *,
    manifest_path: Path = MESH_MANIFEST,
    seed: int = 0,
    budget_seconds: float = 600.0,
    settle_seconds: float = 90.0,
) -> ScenarioResult:
    """Play ``scenario`` on a fresh mesh; the workload gets ``budget_seconds`` to finish its tasks."""
    manifest = load_manifest(manifest_path)
    started = time.monotonic()
    recorder = Recorder()
    # the reporter's credential of the producer route, known to the forged-status fault (GW-EVT-1)
    reporter_key = secrets.token_urlsafe(24)
    with LocalMesh(
        manifest,
        port=0,
        actor_log_level="CRITICAL",
        backstop_interval=1.0,
        gateway_env={GATEWAY_ENV.reporter_keys: reporter_key},
        poll_wait_seconds=_POLL_WAIT_SECONDS,
    ) as mesh:
        raw = make_clients(mesh.endpoint_url)
        _shorten_visibility(manifest, raw.sqs, mesh.resources.queue_urls)
        user_actors = frozenset(manifest.actors)
        lease_seconds = float(min(a.lambda_timeout for a in manifest.deployed_actors() if a.name in user_actors))
        lease_seconds += _LEASE_SLACK_SECONDS
        injector = Injector(
            scenario.rates,
            queue_actors={manifest.queue_name(a.name): a.name for a in manifest.deployed_actors()},
            queue_urls=mesh.resources.queue_urls,
            user_actors=user_actors,
            raw_sqs=raw.sqs,
            seed=seed,
        )
        injector.attach(sqs=mesh.clients.sqs, dynamodb=mesh.clients.dynamodb, s3=mesh.clients.s3)
        actors.activate(injector)
        try:
            restarter = GatewayRestarter(mesh, injector)
            forger = Forger(mesh.url, injector, reporter_key=reporter_key)
            workload = Workload(
                mesh.url,
                plan_tasks(scenario.tasks, seed=seed),
                recorder,
                on_follow=restarter.on_follow,
                on_create=forger.on_create,
            )
            tasks = workload.run(budget_seconds=budget_seconds)
        finally:
            injector.rates = FaultRates()  # the settle and the reads below see the mesh without faults
        late_copies = injector.send_late_copies()  # every task has ended: these copies arrive after their task's end
        restarter.join()
        # the deadline timers (x-deadline) stay delayed until their tasks' deadlines: not envelopes of the flow
        actor_queues = {name: url for name, url in mesh.resources.queue_urls.items() if name != naming.DEADLINE}
        longest_return = lease_seconds + _VISIBILITY_SLACK_SECONDS + lease_seconds + _VISIBILITY_SLACK_SECONDS
        leftovers = _settle(raw.sqs, actor_queues, max(settle_seconds, longest_return))
        actors.deactivate()
        views = _views(mesh.url, tasks)
        letters = _dead_letters(raw.sqs, mesh.resources.dlq_urls, user_actors | {"x-sink", "x-sump"})
        checkpoints = _checkpoints(raw.s3, mesh.resources.bucket)
        calls = actors.calls()
    history = History(
        tasks=tasks,
        observations=recorder.observations,
        views=views,
        calls=calls,
        child_task_writes=injector.child_task_writes,
        dead_letters=letters,
        leftovers=leftovers,
        checkpoints=checkpoints,
        lease_seconds=lease_seconds,
        invocations=list(injector.invocations),
        visibility_seconds=lease_seconds + _VISIBILITY_SLACK_SECONDS,
        flow_timeouts={name: flow.timeout for name, flow in manifest.flows.items()},
        crew_sets=actors.crew_sets(),
        layer_sets=actors.layer_sets(),
        forged_accepted=[str(post) for post in forger.accepted()],
    )
    return ScenarioResult(
        scenario=scenario,
        seconds=time.monotonic() - started,
        tasks=len(tasks),
        outcomes=Counter(str((view or {}).get("status")) for view in views.values()),
        played=Counter(injector.played),
        observed=Counter(injector.observed),
        handler_calls=len(calls),
        duplicate_runs=duplicate_runs(calls),
        runs_after_lease=runs_after_lease(calls, lease_seconds),
        dead_letters=len(letters),
        sse_events=sum(1 for o in recorder.observations if o.source == "sse"),
        get_reads=sum(1 for o in recorder.observations if o.source == "get"),
        client_retries=recorder.retries,
        sse_resumes=recorder.resumes,
        ambiguous_creates=recorder.ambiguous,
        late_copies=late_copies,
        runs_across_end=runs_across_end(history),
        forged_posts=len(forger.posts),
        crew_sets=len(history.crew_sets),
        layer_sets=len(history.layer_sets),
        violations=check(history),
        errors=[*recorder.errors, *restarter.errors],
    )


def _shorten_visibility(manifest: Manifest, sqs: Any, queue_urls: dict[str, str]) -> None:
    for name, spec in manifest.actors.items():
        deployed = next(a for a in manifest.deployed_actors() if a.name == name)
        visibility = deployed.lambda_timeout + _LEASE_SLACK_SECONDS + _VISIBILITY_SLACK_SECONDS
        del spec
        sqs.set_queue_attributes(QueueUrl=queue_urls[name], Attributes={"VisibilityTimeout": str(visibility)})


_COUNTS: Final = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def _settle(sqs: Any, queue_urls: dict[str, str], seconds: float) -> dict[str, int]:
    """Wait until every actor and crew queue is empty; the counts left when ``seconds`` ran out."""
    ends = time.monotonic() + seconds
    while True:
        counts = {}
        for name, url in queue_urls.items():
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=_COUNTS)["Attributes"]
            counts[name] = sum(int(attributes.get(attribute, "0")) for attribute in _COUNTS)
        if not any(counts.values()) or time.monotonic() >= ends:
            return counts
        time.sleep(0.5)


def _views(url: str, tasks: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    out: dict[str, dict[str, Any] | None] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for task_id in tasks:
            response = http.get(f"/api/v1/mesh/{task_id}")
            out[task_id] = response.json() if response.status_code == 200 else None
    return out


def _dead_letters(sqs: Any, dlq_urls: dict[str, str], actors_with_dlq: frozenset[str]) -> list[DeadLetter]:
    """Every message of the actors' DLQs, read with a long visibility timeout so each is seen once."""
    out = []
    for actor in sorted(actors_with_dlq):
        while True:
            response = sqs.receive_message(
                QueueUrl=dlq_urls[actor], MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=0
            )
            messages = response.get("Messages", [])
            if not messages:
                break
            for message in messages:
                try:
                    body = json.loads(message["Body"])
                except ValueError:
                    body = None
                out.append(DeadLetter(actor, body if isinstance(body, dict) else None))
    return out


def _checkpoints(s3: Any, bucket: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for prefix in ("succeeded/", "failed/"):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                text = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode("utf-8")
                out[item["Key"]] = [json.loads(line) for line in text.split("\n") if line]
    return out
