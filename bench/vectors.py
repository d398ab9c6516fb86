"""Per-task request vectors: every AWS call one task makes, labelled by component, service, operation and key class.

``python -m bench.vectors`` writes one JSON file per configuration into :data:`VECTORS_DIR` (the capacity model's
input, ``asya.capacity``): ``text-pipeline`` at batch 10 and progress ``hops``, payloads of 100 B, 1 KB and 10 KB,
run history off and ``steps``, unwatched and watched. Each file holds, per task:

- ``requests``: ``(component, service, operation, key_class) -> requests`` (:mod:`bench.keyclass`), counted by
  driving :data:`TASKS` tasks through the gateway and every actor (:mod:`bench.drive`) on in-memory clients
  (:mod:`bench.fakes`), plus the calls AWS makes on the mesh's behalf: an API Gateway request and a gateway
  invocation per create, and per actor invocation a Lambda invoke, the event source's ``ReceiveMessage`` and
  ``DeleteMessageBatch``. A watched task adds its stream request; the stream's reads follow the clock and are given
  as a rate (``watch``);
- ``units``: the write units, read units and S3 requests of each labelled call, metered with exact item sizes on moto
  (:mod:`bench.meter` with shadow reads). Units need stored items, so they are measured here only, never in a test;
- ``functions``: per actor, invocations and records per task.

:func:`recount` repeats the in-memory count in about a second; ``tests/unit/test_capacity_vectors.py`` compares it
with the committed files, so a change to the requests a task makes fails ``make test`` until the vectors are
regenerated (``python -m bench.vectors``, about a minute).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from asya.capacity import VECTORS_DIR
from bench import keyclass
from bench.drive import Drive, drive
from bench.meshes import FLOW, flow_actors, manifest_variant
from bench.meter import Meter, Usage

__all__ = [
    "CONFIGS",
    "REGENERATE",
    "TASKS",
    "VectorConfig",
    "compare",
    "main",
    "recount",
    "regenerate",
]

TASKS: Final = 10
REGENERATE: Final = "python -m bench.vectors  (or: make vectors)"
_SIZES: Final = {"100b": 100, "1kb": 1024, "10kb": 10 * 1024}


@dataclass(frozen=True)
class VectorConfig:
    """One configuration of the example flow."""

    payload: str
    history: str
    watched: bool

    @property
    def name(self) -> str:
        return f"{FLOW}-{self.payload}-{self.history}-{'watched' if self.watched else 'unwatched'}"

    @property
    def payload_bytes(self) -> int:
        return _SIZES[self.payload]


CONFIGS: Final = tuple(
    VectorConfig(payload, history, watched)
    for payload in _SIZES
    for history in ("off", "steps")
    for watched in (False, True)
)


def task_payload(size: int) -> dict[str, Any]:
    """The input of a task, ``size`` bytes of JSON: a text of words, no partial output (``stream: false``)."""
    base = {"text": "", "stream": False}
    room = size - len(json.dumps(base, separators=(",", ":")))
    words = ("Hello World, what a GREAT day to measure an actor mesh " * (room // 50 + 1))[: max(room, 1)]
    return {"text": words, "stream": False}


def _classify(namespace: str) -> Any:
    def classify(service: str, operation: str, params: Mapping[str, Any]) -> str:
        return keyclass.call_class(service, operation, params, namespace=namespace)

    return classify


def _requests(usage: Mapping[tuple[str, str, str, str], Usage], run: Drive, config: VectorConfig) -> dict[str, float]:
    """Requests per task by ``component|service|operation|key_class``, the calls AWS makes for the mesh added."""
    tasks = len(run.task_ids)
    out: dict[str, float] = {}

    def add(key: tuple[str, str, str, str], count: float) -> None:
        name = "|".join(key)
        out[name] = out.get(name, 0.0) + count / tasks

    for key, value in usage.items():
        add(key, value.requests)
    add(("gateway", "apigateway", "POST /api/v1/mesh/", "stage"), tasks)
    add(("gateway", "lambda", "Invoke", "function:gateway"), tasks)
    if config.watched:
        add(("stream", "apigateway", "GET /api/v1/mesh/events", "stage"), tasks)
        add(("stream", "lambda", "Invoke", "function:stream"), tasks)
    for actor, invocations in run.invocations.items():
        add((actor, "lambda", "Invoke", f"function:{actor}"), invocations)
        add((actor, "sqs", "ReceiveMessage", f"queue:{actor}"), invocations)
        add((actor, "sqs", "DeleteMessageBatch", f"queue:{actor}"), invocations)
    return {k: round(v, 6) for k, v in sorted(out.items())}


@functools.cache
def _session() -> Any:
    import boto3

    return boto3.session.Session()


def _fake_mesh(namespace: str) -> tuple[Any, Any, str, str]:
    """In-memory clients (botocore's request building, nothing sent) and the names the local mode would provision."""
    from types import SimpleNamespace

    from asya_local.provision import MeshResources
    from bench.fakes import FAKE_ACCOUNT, FAKE_REGION, InMemoryAws, botocore_client

    aws = InMemoryAws()
    session = _session()
    clients = SimpleNamespace(
        **{name: botocore_client(name, aws, session=session) for name in ("sqs", "dynamodb", "s3")}
    )
    resources = MeshResources(namespace=namespace, table=f"asya-{namespace}-tasks", bucket=f"asya-{namespace}")
    return clients, resources, FAKE_ACCOUNT, FAKE_REGION


def recount(config: VectorConfig) -> dict[str, float]:
    """The requests per task of ``config``, counted on in-memory clients (seconds; no units)."""
    manifest = manifest_variant(batch_size=10, progress="hops", history=config.history)
    meter = Meter(classify=_classify(manifest.namespace))
    clients, resources, account, region = _fake_mesh(manifest.namespace)
    for client in (clients.sqs, clients.dynamodb, clients.s3):
        meter.attach(client)
    run = drive(
        manifest,
        flow=FLOW,
        payload=task_payload(config.payload_bytes),
        tasks=TASKS,
        clients=clients,
        resources=resources,
        account_id=account,
        region=region,
        meter=meter,
    )
    return _requests(meter.snapshot_classes(), run, config)


def _measure_units(config: VectorConfig) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, Any]]:
    """Requests, units by key and functions of ``config`` on moto (exact write units)."""
    from asya_local.moto_server import DEFAULT_REGION, MOTO_ACCOUNT_ID, MotoServer, make_clients
    from asya_local.provision import provision

    manifest = manifest_variant(batch_size=10, progress="hops", history=config.history)
    with MotoServer(host="127.0.0.1", port=0) as moto:
        clients = make_clients(moto.endpoint_url)
        shadow = make_clients(moto.endpoint_url).dynamodb
        resources = provision(
            manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3, region=DEFAULT_REGION
        )
        meter = Meter(shadow_dynamodb=shadow, classify=_classify(manifest.namespace))
        for client in (clients.sqs, clients.dynamodb, clients.s3):
            meter.attach(client)
        common: dict[str, Any] = {
            "flow": FLOW,
            "payload": task_payload(config.payload_bytes),
            "clients": clients,
            "resources": resources,
            "account_id": MOTO_ACCOUNT_ID,
            "region": DEFAULT_REGION,
            "meter": meter,
        }
        drive(manifest, tasks=TASKS, **common)  # warm-up: handlers imported, first-use paths taken
        meter.reset()
        run = drive(manifest, tasks=TASKS, **common)
    usage = meter.snapshot_classes()
    tasks = len(run.task_ids)
    units: dict[str, dict[str, float]] = {}
    for key, value in sorted(usage.items()):
        row = {
            "wru_table": value.wru_table / tasks,
            "wru_index": value.wru_index / tasks,
            "rru": value.rru / tasks,
            "s3_tier1": value.s3_tier1 / tasks,
            "s3_tier2": value.s3_tier2 / tasks,
            "sqs_billed": value.billed_requests / tasks if key[1] == "sqs" else 0.0,
            "payload_bytes": value.payload_bytes / tasks,
        }
        units["|".join(key)] = {k: round(v, 6) for k, v in row.items() if v}
    functions = {
        actor: {"invocations": run.invocations[actor] / tasks, "records": run.records[actor] / tasks}
        for actor in sorted(run.invocations)
    }
    return _requests(usage, run, config), units, functions


def _watch() -> dict[str, Any]:
    """The watched stream's reads: one eventually consistent ``BatchGetItem`` of the task item per poll, at the
    fast cadence while the task moves (GW-SSE-9)."""
    from asya_gateway.config import GatewayConfig

    fast = GatewayConfig().sse_poll_fast
    return {"polls_per_second": round(1 / fast, 6), "rru_per_poll": 0.5, "key_class": "table:TASK#{id}/TASK"}


def build(config: VectorConfig) -> dict[str, Any]:
    """The vector document of ``config`` (runs moto; about ten seconds)."""
    requests = recount(config)
    measured, units, functions = _measure_units(config)
    if measured != requests:
        raise RuntimeError(
            f"{config.name}: the in-memory count and moto's disagree, so the fast test could not stand for the "
            f"bench:\n{compare(measured, requests)}"
        )
    totals: dict[str, float] = {}
    for row in units.values():
        for name, value in row.items():
            totals[name] = round(totals.get(name, 0.0) + value, 6)
    return {
        "config": {
            "flow": FLOW,
            # the order an envelope visits the actors: the model's ramp passes work from one to the next
            "route": flow_actors(manifest_variant(batch_size=10, progress="hops", history=config.history)),
            "payload_bytes": config.payload_bytes,
            "progress": "hops",
            "batch_size": 10,
            "history": config.history,
            "watched": config.watched,
            "tasks": TASKS,
        },
        "regenerate": REGENERATE,
        "requests": requests,
        "units": units,
        "totals": totals,
        "functions": functions,
        "watch": _watch() if config.watched else None,
    }


def compare(committed: Mapping[str, float], counted: Mapping[str, float]) -> str:
    """The differences between two request maps, one line each (empty: equal)."""
    lines = []
    for key in sorted(set(committed) | set(counted)):
        old, new = committed.get(key), counted.get(key)
        if old != new:
            lines.append(f"  {key}: committed {old}, counted now {new}")
    return "\n".join(lines)


def path_of(config: VectorConfig, directory: Path = VECTORS_DIR) -> Path:
    return directory / f"{config.name}.json"


def regenerate(configs: Sequence[VectorConfig] = CONFIGS, directory: Path = VECTORS_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    for config in configs:
        base = cache.get((config.payload, config.history))
        if base is None:
            base = build(VectorConfig(config.payload, config.history, watched=False))
            cache[(config.payload, config.history)] = base
        document = base if not config.watched else _watched(base, config)
        path = path_of(config, directory)
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
        print(f"bench.vectors: wrote {path}", file=sys.stderr)
    return written


def _watched(base: Mapping[str, Any], config: VectorConfig) -> dict[str, Any]:
    document = json.loads(json.dumps(base))
    document["config"]["watched"] = True
    document["requests"] = recount(config)
    document["watch"] = _watch()
    return dict(document)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vectors", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="recount and compare with the committed vectors only")
    args = parser.parse_args(argv)
    if args.check:
        problems = []
        for config in CONFIGS:
            committed = json.loads(path_of(config).read_text(encoding="utf-8"))["requests"]
            diff = compare(committed, recount(config))
            if diff:
                problems.append(f"{config.name}:\n{diff}")
        print("\n".join(problems) or "vectors up to date")
        return 1 if problems else 0
    regenerate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
