"""Benchmark 4: latency and throughput of the example flow on the local mesh, with moto's own request rate beside.

One ``LocalMesh`` of the example manifest (batch size 10, progress ``hops``), pollers running as ``asya dev`` runs
them, serves three phases:

1. **low load**: tasks one after another; for each, the wall time from just before ``POST /api/v1/mesh/`` to the
   terminal ``status`` event read from ``GET .../events`` (SSE, as a client sees it), and the hop latency: that time
   divided by the task's envelope-hops (each actor of the route and x-sink: an envelope through SQS, a poller and an
   actor). Status changes are no longer logged one item each (followers read the task item every
   250 ms and coalesce what changed between two reads), so the per-hop gaps of a fast task cannot be read back;
   the mean per task is what remains measurable, and includes the SSE poll's delay of the final status;
2. **saturation**: ``tasks`` tasks created by ``creators`` threads as fast as the gateway takes them; throughput is
   tasks / (last x-sink ack - first create), with the x-sink poller's ack count read in-process. A counting meter
   (no billing) gives the AWS requests per task of this very phase, idle polls included, and the CPU time of this
   process (gateway, pollers, actors) and of moto's server process over the phase says which of the two was busy
   (moto's from ``/proc``: Linux only, else not reported);
3. **moto ceiling**: a tight loop of ``SendMessage``, ``ReceiveMessage``, ``DeleteMessage``, ``GetItem``,
   ``PutItem``, ``UpdateItem`` against the same moto server from 1 and from 4 threads; requests/s divided by the
   requests per task is the most tasks/s this moto could serve the mesh.

Absolute figures depend on the machine; the ratios are measured side by side in one process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import httpx

from asya.store import TaskStore
from bench.meshes import TaskCreator, flow_actors, follow_to_terminal, manifest_variant, running_mesh, statuses
from bench.meter import Meter
from bench.stats import summarize

__all__ = ["run"]

_WAIT_SECONDS: Final = 180.0


def _low_load(mesh: Any, store: TaskStore, tasks: int) -> dict[str, Any]:
    envelope_hops = len(flow_actors(mesh.manifest))
    e2e: list[float] = []
    hops: list[float] = []
    with httpx.Client(timeout=httpx.Timeout(30.0, read=60.0)) as http:
        creator = TaskCreator(http, mesh.url)
        for _ in range(tasks):
            started = time.monotonic()
            task_id = creator.create()
            status = follow_to_terminal(http, mesh.url, task_id)
            e2e.append((time.monotonic() - started) * 1000)
            if status != "succeeded":
                raise RuntimeError(f"latency benchmark: task {task_id} ended {status}")
            hops.append(e2e[-1] / envelope_hops)
    return {
        "tasks": tasks,
        "e2e_ms": summarize(e2e).to_dict(),
        "hop_ms": summarize(hops).to_dict(),
    }


def _wait_for(predicate: Callable[[], bool], what: str) -> float:
    deadline = time.monotonic() + _WAIT_SECONDS
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"latency benchmark: timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic()


def _saturation(mesh: Any, store: TaskStore, meter: Meter, tasks: int, creators: int) -> dict[str, Any]:
    sink = mesh.esms["x-sink"]
    baseline = sink.stats.deleted
    meter.reset()
    meter.enabled = True
    started = time.monotonic()
    cpu_started = (time.process_time(), _cpu_seconds(mesh.moto_pid))

    def create_some(count: int) -> list[str]:
        with httpx.Client(timeout=30) as http:
            creator = TaskCreator(http, mesh.url)
            return [creator.create() for _ in range(count)]

    shares = [tasks // creators + (1 if i < tasks % creators else 0) for i in range(creators)]
    with ThreadPoolExecutor(max_workers=creators) as pool:
        ids = [task_id for chunk in pool.map(create_some, shares) for task_id in chunk]
    created = time.monotonic()
    finished = _wait_for(lambda: sink.stats.deleted - baseline >= tasks, f"{tasks} tasks to reach x-sink")
    cpu_finished = (time.process_time(), _cpu_seconds(mesh.moto_pid))
    meter.enabled = False
    requests = sum(usage.requests for usage in meter.snapshot().values())
    outcome = statuses(store, ids)
    failed = [task_id for task_id, status in outcome.items() if status != "succeeded"]
    if failed:
        raise RuntimeError(f"latency benchmark: {len(failed)} of {tasks} saturation tasks did not succeed")
    elapsed = finished - started
    return {
        "tasks": tasks,
        "creators": creators,
        "seconds": elapsed,
        "create_seconds": created - started,
        "tasks_per_second": tasks / elapsed,
        "aws_requests_per_task": requests / tasks,
        "mesh_cpu_busy": (cpu_finished[0] - cpu_started[0]) / elapsed,
        "moto_cpu_busy": _busy(cpu_started[1], cpu_finished[1], elapsed),
    }


def _cpu_seconds(pid: int | None) -> float | None:
    """User plus system CPU seconds of process ``pid`` so far, from ``/proc`` (``None`` without it)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def _busy(started: float | None, finished: float | None, elapsed: float) -> float | None:
    return None if started is None or finished is None else (finished - started) / elapsed


def _moto_rate(endpoint: str, table: str, threads: int, seconds: float) -> float:
    from asya_local.moto_server import make_clients

    setup = make_clients(endpoint)
    url = setup.sqs.create_queue(QueueName="asya-bench-probe")["QueueUrl"]
    stop = threading.Event()
    counts = [0] * threads

    def loop(index: int) -> None:
        clients = make_clients(endpoint)
        key = {"pk": {"S": f"BENCH#{index}"}, "sk": {"S": "PROBE"}}
        while not stop.is_set():
            clients.sqs.send_message(QueueUrl=url, MessageBody="x" * 512)
            got = clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=0)
            for message in got.get("Messages", []):
                clients.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            clients.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)
            clients.dynamodb.put_item(TableName=table, Item={**key, "n": {"N": "0"}})
            clients.dynamodb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET n = n + :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
            counts[index] += 5 + len(got.get("Messages", []))

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.monotonic() - started)


def run(*, quick: bool = False) -> dict[str, Any]:
    low_tasks, saturation_tasks = (8, 60) if quick else (25, 200)
    manifest = manifest_variant()
    with running_mesh(manifest) as mesh:
        store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.clients.dynamodb)
        meter = Meter()
        for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
            meter.attach(client)
        meter.enabled = False
        with httpx.Client(timeout=30) as http:
            creator = TaskCreator(http, mesh.url)
            for _ in range(3):  # warm-up: containers, queue URLs, the gateway's first requests
                follow_to_terminal(http, mesh.url, creator.create())
        low = _low_load(mesh, store, low_tasks)
        saturation = _saturation(mesh, store, meter, saturation_tasks, creators=4)
        endpoint = mesh.clients.endpoint_url
        assert endpoint is not None
        moto = {f"{n}_threads": _moto_rate(endpoint, mesh.resources.table, n, 2.0 if quick else 4.0) for n in (1, 4)}
    ceiling_rps = max(moto.values())
    per_task = saturation["aws_requests_per_task"]
    return {
        "batch_size": manifest.deployed_actors()[0].batch_size,
        "low_load": low,
        "saturation": saturation,
        "moto_requests_per_second": moto,
        "ceiling_tasks_per_second": ceiling_rps / per_task if per_task else None,
    }
