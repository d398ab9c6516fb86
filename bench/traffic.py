"""Benchmark 2: every AWS request the mesh makes for N tasks of the example flow, and what AWS would bill for it.

For each batch size (1, 10) and progress detail (``hops``, ``detailed``, ``final``; P-STAT-19) a fresh
``LocalMesh`` runs the example manifest with the real runtimes. The event source mappings' threads are stopped and
the bench drives them with ``poll_once``, one actor at a time in route order until every queue is empty: batches are
then as full as the batch size allows (as under load in AWS, where the poller fills batches), and the meter's shadow
reads never race another writer. The SQS, DynamoDB and S3 clients the gateway, the runtimes and the pollers share
are metered (:mod:`bench.meter`); one warm-up round (queue URLs resolved, handlers loaded) is not counted. Every task
must end ``succeeded``, else the run fails.

Figures per envelope-hop (one envelope handled by one actor Lambda, x-sink included) and per task, by service and by
component (``gateway``, each actor; ``ReceiveMessage`` and ``DeleteMessageBatch`` inside an actor's group are the
event source mapping's). Lambda invocations are the pollers' invocations. Empty receives and the deadline backstop's
sweeps are counted apart: they depend on time, not on tasks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

import httpx

from asya.store import TaskStore
from bench.meshes import FLOW, PAYLOAD, TaskCreator, flow_actors, manifest_variant, running_mesh, statuses, stop_pollers
from bench.meter import READ_OPERATIONS, TIMERS, WRITE_OPERATIONS, Meter, Usage

__all__ = ["BATCH_SIZES", "POLLER_OPERATIONS", "PROGRESS_MODES", "TIME_DRIVEN", "measure", "run", "summarize_usage"]

BATCH_SIZES: Final = (1, 10)
PROGRESS_MODES: Final = ("hops", "detailed", "final")
_MAX_ROUNDS: Final = 20
#: Components whose calls follow the clock, not the tasks (the deadline sweep runs every few seconds).
TIME_DRIVEN: Final = frozenset({"backstop"})
#: Calls the event source mapping makes (in the Lambda service, outside the function).
POLLER_OPERATIONS: Final = frozenset({"ReceiveMessage", "DeleteMessageBatch"})


def summarize_usage(
    usage: dict[tuple[str, str, str], Usage], *, tasks: int, hops: int, invocations: dict[str, int]
) -> dict[str, Any]:
    """Per-service and per-component totals, normalised per envelope-hop and per task. Pure. Time-driven components
    (the backstop) are reported apart and left out of every per-task figure."""
    timed = {key: value for key, value in usage.items() if key[0] in TIME_DRIVEN}
    usage = {key: value for key, value in usage.items() if key[0] not in TIME_DRIVEN}
    by_service: dict[str, Usage] = defaultdict(Usage)
    by_component: dict[str, dict[str, Usage]] = defaultdict(lambda: defaultdict(Usage))
    by_operation: dict[str, Usage] = defaultdict(Usage)
    for (component, service, operation), value in usage.items():
        by_service[service].add(value)
        by_component[component][service].add(value)
        by_operation[f"{service}:{operation}"].add(value)
    total_invocations = sum(invocations.values())

    def per(value: float, count: int) -> float:
        return value / count if count else 0.0

    services: dict[str, Any] = {}
    for service, value in sorted(by_service.items()):
        billed = value.billed_requests - value.empty_receives
        services[service] = {
            "total": value.to_dict(),
            "per_hop": {
                "requests": per(value.requests - value.empty_receives, hops),
                "billed_requests": per(billed, hops),
                "wru": per(value.wru, hops),
                "rru": per(value.rru, hops),
            },
            "per_task": {
                "requests": per(value.requests - value.empty_receives, tasks),
                "billed_requests": per(billed, tasks),
                "wru": per(value.wru, tasks),
                "wru_table": per(value.wru_table, tasks),
                "wru_index": per(value.wru_index, tasks),
                "rru": per(value.rru, tasks),
                "s3_tier1": per(value.s3_tier1, tasks),
                "s3_tier2": per(value.s3_tier2, tasks),
            },
        }
    function_calls: dict[str, dict[str, float]] = defaultdict(dict)
    for (component, service, operation), value in usage.items():
        if component in invocations and operation not in POLLER_OPERATIONS:
            calls = function_calls[component]
            calls[service] = calls.get(service, 0.0) + per(value.requests - value.empty_receives, tasks)
    reads_per_invocation: dict[str, dict[str, float]] = {}
    for component in by_component:
        if component not in invocations:
            continue
        reads = {
            op: value.requests
            for (c, service, op), value in usage.items()
            if c == component and service == "dynamodb" and op in READ_OPERATIONS
        }
        reads_per_invocation[component] = {op: per(n, invocations[component]) for op, n in sorted(reads.items())}
    return {
        "tasks": tasks,
        "envelope_hops": hops,
        "invocations": dict(invocations),
        "lambda_invocations_per_task": per(total_invocations, tasks),
        "lambda_invocations_per_hop": per(total_invocations, hops),
        "services": services,
        "operations": {name: value.to_dict() for name, value in sorted(by_operation.items())},
        "components": {
            component: {service: value.to_dict() for service, value in sorted(calls.items())}
            for component, calls in sorted(by_component.items())
        },
        "dynamodb_reads_per_invocation": reads_per_invocation,
        "function_calls_per_task": {c: dict(sorted(v.items())) for c, v in sorted(function_calls.items())},
        "time_driven": {"/".join(key): value.to_dict() for key, value in sorted(timed.items())},
    }


def _drain(mesh: Any, meter: Meter, actors: list[str]) -> None:
    """Run each actor's poller in route order until a full pass finds every queue empty."""
    esms = mesh.esms
    for _ in range(_MAX_ROUNDS):
        delivered = 0
        for actor in actors:
            with meter.component(actor):
                while (received := esms[actor].poll_once(wait_seconds=0)) > 0:
                    delivered += received
        if delivered == 0:
            return
    raise RuntimeError(f"queues still not empty after {_MAX_ROUNDS} rounds")


def measure(*, batch_size: int, progress: str, tasks: int, fly: bool = False, history: str = "off") -> dict[str, Any]:
    """Meter ``tasks`` tasks of the example flow on a fresh local mesh; ``fly``: summarize streams its summary as
    FLY values (the budget of GW-DATA-8 is stated without them); ``history``: the flow's run history (P-HIST-1),
    whose S3 PUTs are priced apart from GW-DATA-8's budget (``s3_puts_per_invocation``, ``s3_puts_per_hop``)."""
    from asya_local.moto_server import make_clients

    manifest = manifest_variant(batch_size=batch_size, progress=progress, history=history)
    actors = [*flow_actors(manifest), "x-sump"]
    with running_mesh(manifest) as mesh, httpx.Client(timeout=30) as http:
        creator = TaskCreator(http, mesh.url)
        stop_pollers(mesh)
        shadow = make_clients(mesh.clients.endpoint_url).dynamodb
        meter = Meter(shadow_dynamodb=shadow)
        for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
            meter.attach(client)
        payload = {**PAYLOAD, "stream": fly}
        warm = [creator.create(payload) for _ in range(batch_size)]
        _drain(mesh, meter, actors)
        meter.reset()
        before = {actor: esm.stats for actor, esm in mesh.esms.items()}
        ids = [creator.create(payload) for _ in range(tasks)]
        _drain(mesh, meter, actors)
        usage = meter.snapshot()
        after = {actor: esm.stats for actor, esm in mesh.esms.items()}
        store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=shadow)
        outcome = statuses(store, [*warm, *ids])
    failed = {task_id: status for task_id, status in outcome.items() if status != "succeeded"}
    if failed:
        raise RuntimeError(f"traffic benchmark: {len(failed)} tasks did not succeed: {sorted(failed.items())[:3]}")
    invocations = {a: after[a].invocations - before[a].invocations for a in after if after[a] != before[a]}
    records = {a: after[a].records - before[a].records for a in after}
    summary = summarize_usage(usage, tasks=tasks, hops=sum(records.values()), invocations=invocations)
    writes = {
        actor: sum(
            value.requests
            for (c, service, op), value in usage.items()
            if (c, service) == (actor, "dynamodb") and op in WRITE_OPERATIONS
        )
        for actor in records
    }
    hops = sum(records.values())
    puts = {
        actor: sum(
            v.requests for (c, service, op), v in usage.items() if (c, service, op) == (actor, "s3", "PutObject")
        )
        for actor in records
    }
    gateway_sqs = sum(v.billed_requests for (c, service, _), v in usage.items() if (c, service) == ("gateway", "sqs"))
    all_sqs = sum(
        v.billed_requests - v.empty_receives
        for (c, service, _), v in usage.items()
        if service == "sqs" and c not in TIME_DRIVEN
    )
    timer_sqs = sum(v.billed_requests for (c, service, _), v in usage.items() if (c, service) == (TIMERS, "sqs"))
    summary.update(
        # GW-DATA-8: the create's send (the gateway's) and all timer traffic are reported apart from the per-hop figure
        sqs_per_hop_without_create=(all_sqs - gateway_sqs - timer_sqs) / hops if hops else 0.0,
        sqs_create_per_task=gateway_sqs / tasks,
        sqs_timers_per_task=timer_sqs / tasks,
        dynamodb_write_requests_per_hop={a: writes[a] / n for a, n in records.items() if n},
        s3_puts_per_invocation={a: puts[a] / n for a, n in invocations.items() if n},
        s3_puts_per_hop={a: puts[a] / n for a, n in records.items() if n},
        history=history,
        batch_size=batch_size,
        progress=progress,
        fly=fly,
        records={a: n for a, n in records.items() if n},
        envelopes_per_task={a: n / tasks for a, n in records.items() if n},
        memory_mb={a.name: a.memory for a in manifest.deployed_actors()},
        steps=len(manifest.flows[FLOW].route),
        mean_batch={a: records[a] / n for a, n in invocations.items() if n},
    )
    return summary


def run(*, quick: bool = False) -> dict[str, Any]:
    """Every batch size and progress detail; keys ``"b{batch}-{progress}"``; plus ``"b10-hops-history"``, the default
    configuration with the run history on (P-HIST-2), whose cost sits beside ``b10-hops``'s."""
    tasks = 10 if quick else 20
    configs = {
        f"b{batch}-{progress}": measure(batch_size=batch, progress=progress, tasks=tasks)
        for batch in BATCH_SIZES
        for progress in PROGRESS_MODES
    }
    configs["b10-hops-history"] = measure(batch_size=10, progress="hops", tasks=tasks, history="steps")
    return configs
