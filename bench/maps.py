"""Wall time of a map whose slices run at the same time (P-MAP-2, P-MAP-3), on the local mesh.

One task of ``flows/bench_map.py`` on a fresh ``LocalMesh`` with its pollers running: a map of 10 slices over ``nap``
(``bench.handlers.timed``, a handler of known duration that stamps when it ran), whose ``batch_size`` is 10, so one
invocation may receive every slice, then the same map bounded to 5 slices at once. Each map's wall time is from its
first slice's start to its last slice's end, as the slices stamped them. Run one after another, 10 slices take at least
10 handler durations; at the same time about one, and bounded to 5 about two.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import httpx

from asya.manifest import Manifest, parse_manifest
from bench.meshes import running_mesh

__all__ = ["SLICES", "SLICE_SECONDS", "run"]

FLOW: Final = "bench-map"
SLICES: Final = 10
SLICE_SECONDS: Final = 0.5
_REPO: Final = Path(__file__).resolve().parent.parent
_TERMINAL: Final = frozenset({"succeeded", "failed", "canceled"})


def _manifest() -> Manifest:
    data: dict[str, Any] = {
        "namespace": "benchmaps",
        "defaults": {"timeout": "60s"},
        "actors": {
            "nap": {"handler": "bench.handlers.timed", "code": ".", "batch_size": SLICES, "max_concurrency": SLICES}
        },
        "flows": {FLOW: {"source": "flows/bench_map.py", "timeout": 300}},
    }
    return parse_manifest(data, base_dir=_REPO, source="bench/maps.py")


def _span(results: list[dict[str, Any]]) -> float:
    """Seconds from the earliest start to the latest end of a map's slices."""
    return max(float(r["ended"]) for r in results) - min(float(r["started"]) for r in results)


def run(*, quick: bool = False) -> dict[str, Any]:
    """One task; its two maps' wall times in seconds (``quick`` changes nothing)."""
    del quick
    items = [{"i": i, "sleep_s": SLICE_SECONDS} for i in range(SLICES)]
    with running_mesh(_manifest()) as mesh, httpx.Client(timeout=60) as http:
        started = time.monotonic()
        response = http.post(f"{mesh.url}/api/v1/mesh/", params={"flow": FLOW}, json={"payload": {"items": items}})
        if response.status_code != 201:
            raise RuntimeError(f"creating a {FLOW} task failed: {response.status_code} {response.text}")
        task_id = str(response.json()["id"])
        while (task := http.get(f"{mesh.url}/api/v1/mesh/{task_id}").json())["status"] not in _TERMINAL:
            if time.monotonic() - started > 120:
                raise RuntimeError(f"{FLOW}: the task did not end in 120 s")
            time.sleep(0.05)
        task_seconds = time.monotonic() - started
        if task["status"] != "succeeded":
            raise RuntimeError(f"{FLOW}: the task ended {task['status']}: {task.get('error')}")
    naps, bounded = task["result"]["naps"], task["result"]["bounded"]
    result = {
        "slices": SLICES,
        "slice_seconds": SLICE_SECONDS,
        "batch_size": SLICES,
        "in_turn_seconds": SLICES * SLICE_SECONDS,
        "wall_seconds": _span(naps),
        "bounded_5_wall_seconds": _span(bounded),
        "task_seconds": task_seconds,
    }
    print(
        f"bench: a map of {SLICES} slices of a {SLICE_SECONDS:g} s handler (batch_size {SLICES}): "
        f"{result['wall_seconds']:.2f} s wall (in turn: {result['in_turn_seconds']:g} s); bounded to 5: "
        f"{result['bounded_5_wall_seconds']:.2f} s; the task {task_seconds:.2f} s"
    )
    return result
