"""Fan-in cost (P-AGG-3): requests, DynamoDB write units and wall time of the aggregator for 10, 100
and 1,000 slices in the local mesh, which must grow linearly.

One task of the example ``documents`` flow per size (``chunk`` yields ``N`` chunks, so the aggregator ``x-fanin-chunk``
receives ``N + 1`` slices) on a fresh ``LocalMesh``; the pollers are stopped and each actor is driven with ``poll_once``
in route order, its calls metered as its component (``bench.meter``, with the shadow client, so write units are
exact). Figures are per size and per slice; ``linearity`` is the per-slice figure at the largest size divided by the
one at the smallest (1.0 = perfectly linear; an O(N^2) fan-in such as listing the slices on every arrival would show
about 100 here).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any, Final

import httpx
import yaml

from asya import naming
from asya.manifest import Manifest, parse_manifest
from asya.store import TaskStore
from bench.meshes import MANIFEST_PATH, running_mesh, statuses, stop_pollers
from bench.meter import WRITE_OPERATIONS, Meter
from bench.traffic import POLLER_OPERATIONS

__all__ = ["AGGREGATOR", "FLOW", "SIZES", "measure", "run"]

FLOW: Final = "documents"
AGGREGATOR: Final = naming.default_aggregator("chunk")
SIZES: Final = (10, 100, 1000)
_ROUTE: Final = ("chunk", "summarize-chunk", AGGREGATOR, "digest", naming.SINK, naming.SUMP)
_MAX_ROUNDS: Final = 50
_TIMEOUT_SECONDS: Final = 3600


def _document(chunks: int) -> dict[str, Any]:
    """A document that ``chunk`` cuts into exactly ``chunks`` chunks (one sentence each)."""
    return {"text": " ".join(f"Sentence {i} of the document." for i in range(chunks)), "chunk_words": 1}


def _drive(mesh: Any, meter: Meter, timings: dict[str, float]) -> None:
    esms = mesh.esms
    for _ in range(_MAX_ROUNDS):
        delivered = 0
        for actor in _ROUTE:
            started = time.perf_counter()
            with meter.component(actor):
                while (received := esms[actor].poll_once(wait_seconds=0)) > 0:
                    delivered += received
            timings[actor] = timings.get(actor, 0.0) + time.perf_counter() - started
        if delivered == 0:
            return
    raise RuntimeError(f"fan-in benchmark: queues still not empty after {_MAX_ROUNDS} rounds")


def _manifest() -> Manifest:
    """The example manifest with the ``documents`` flow's deadline at an hour: driving 1,000 slices one actor at a
    time through moto takes minutes on a busy machine, and the figures are about requests, not latency."""
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8")))
    data["flows"][FLOW]["timeout"] = _TIMEOUT_SECONDS
    return parse_manifest(data, base_dir=MANIFEST_PATH.parent, source=f"{MANIFEST_PATH.name} (fan-in bench variant)")


def measure(chunks: int) -> dict[str, Any]:
    """Run one ``documents`` task of ``chunks`` chunks; the aggregator's figures."""
    from asya_local.moto_server import make_clients

    manifest = _manifest()
    with running_mesh(manifest) as mesh, httpx.Client(timeout=60) as http:
        stop_pollers(mesh)
        shadow = make_clients(mesh.clients.endpoint_url).dynamodb
        meter = Meter(shadow_dynamodb=shadow)
        for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
            meter.attach(client)
        response = http.post(f"{mesh.url}/api/v1/mesh/", params={"flow": FLOW}, json={"payload": _document(chunks)})
        if response.status_code != 201:
            raise RuntimeError(f"creating a {FLOW} task failed: {response.status_code} {response.text}")
        task_id = str(response.json()["id"])
        timings: dict[str, float] = {}
        started = time.perf_counter()
        _drive(mesh, meter, timings)
        wall = time.perf_counter() - started
        store = TaskStore(table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=shadow)
        status = statuses(store, [task_id])[task_id]
        task = store.get_task(task_id, enforce_deadline=False) or {}
        records = mesh.esms[AGGREGATOR].stats.records
    if status != "succeeded" or (task.get("result") or {}).get("chunks") != chunks:
        raise RuntimeError(f"fan-in benchmark: the {chunks}-chunk task ended {status}: {task.get('error')}")
    usage = meter.snapshot()
    # the aggregator's own calls: the poller's receive and delete are the ESM's, not the aggregator's
    mine = [(op, v) for (c, _, op), v in usage.items() if c == AGGREGATOR and op not in POLLER_OPERATIONS]
    requests = sum(v.requests for _, v in mine)
    wru = sum(v.wru for op, v in mine if op in WRITE_OPERATIONS)
    write_requests = sum(v.requests for op, v in mine if op in WRITE_OPERATIONS)
    slices = chunks + 1
    return {
        "slices": slices,
        "records": records,
        "requests": requests,
        "write_requests": write_requests,
        "wru": wru,
        "aggregator_seconds": timings.get(AGGREGATOR, 0.0),
        "task_seconds": wall,
        "requests_per_slice": requests / slices,
        "wru_per_slice": wru / slices,
        "ms_per_slice": 1000 * timings.get(AGGREGATOR, 0.0) / slices,
    }


def linearity(sizes: Sequence[dict[str, Any]], key: str) -> float:
    """The per-slice ``key`` at the largest size over the one at the smallest (1.0 = linear growth)."""
    first, last = sizes[0][key], sizes[-1][key]
    return float(last / first) if first else 0.0


def run(*, quick: bool = False) -> dict[str, Any]:
    """Every size (``quick``: 10 and 100 only); prints the ratios."""
    sizes = SIZES[:2] if quick else SIZES
    results = [measure(n) for n in sizes]
    ratios = {key: linearity(results, key) for key in ("requests_per_slice", "wru_per_slice", "ms_per_slice")}
    for key, value in ratios.items():
        print(f"bench: fan-in {key} at {sizes[-1]} vs {sizes[0]} chunks: x{value:.2f} (1.00 = linear)")
    return {"sizes": {str(n): r for n, r in zip(sizes, results, strict=True)}, "linearity": ratios}
