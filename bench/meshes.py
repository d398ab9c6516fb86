"""The example mesh as the benchmarks run it: manifest variants, a quiet ``LocalMesh``, task creation over HTTP.

Variants change only what a benchmark varies (``defaults.batch_size``, the flow's ``progress`` detail); everything
else is the repository's ``asya.yaml``. The flow is ``text-pipeline`` (``normalize -> analyze -> summarize``, then
``x-sink``), whose ``summarize`` streams FLY values.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from asya import naming
from asya.manifest import Manifest, parse_manifest

__all__ = [
    "FLOW",
    "MANIFEST_PATH",
    "PAYLOAD",
    "TaskCreator",
    "flow_actors",
    "follow_to_terminal",
    "manifest_variant",
    "running_mesh",
    "statuses",
    "stop_pollers",
]

MANIFEST_PATH: Final = Path(__file__).resolve().parent.parent / "asya.yaml"
FLOW: Final = "text-pipeline"
_TERMINAL: Final = frozenset({"succeeded", "failed", "canceled"})
PAYLOAD: Final = {"text": "Hello World, what a GREAT day to measure an actor mesh"}


def manifest_variant(
    *, batch_size: int | None = None, progress: str | None = None, history: str | None = None
) -> Manifest:
    """The example manifest with the given batch size (every actor), progress detail and run history (the benchmark
    flow)."""
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8")))
    if batch_size is not None:
        data.setdefault("defaults", {})["batch_size"] = batch_size
    if progress is not None:
        data["flows"][FLOW]["progress"] = progress
    if history is not None:
        data["flows"][FLOW]["history"] = history
    return parse_manifest(data, base_dir=MANIFEST_PATH.parent, source=f"{MANIFEST_PATH.name} (bench variant)")


def flow_actors(manifest: Manifest) -> list[str]:
    """The actors an envelope of the benchmark flow visits, in order, ending with x-sink."""
    return [*manifest.flows[FLOW].route, naming.SINK]


@contextmanager
def running_mesh(manifest: Manifest, **kwargs: Any) -> Iterator[Any]:
    """A started ``LocalMesh`` on a free port, with its own moto server."""
    from asya_local.mesh import LocalMesh

    with LocalMesh(manifest, port=0, **kwargs) as mesh:
        yield mesh


def stop_pollers(mesh: Any) -> None:
    """Stop every event source mapping's worker threads; ``poll_once`` still works for driving actors by hand."""
    esms = mesh.esms
    for esm in esms.values():
        esm.request_stop()
    for esm in esms.values():
        esm.stop(timeout=30)


class TaskCreator:
    """``POST /api/v1/mesh/?flow=`` over one HTTP client."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self._http = http
        self._url = url

    def create(self, payload: Any = PAYLOAD, *, flow: str = FLOW) -> str:
        """The new task's id; raises on any other answer than 201."""
        response = self._http.post(f"{self._url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload})
        if response.status_code != 201:
            raise RuntimeError(f"creating a {flow} task failed: {response.status_code} {response.text}")
        return str(response.json()["id"])


def follow_to_terminal(http: httpx.Client, url: str, task_id: str) -> str:
    """Read the task's SSE stream until a terminal status, as a client would; returns that status."""
    with http.stream("GET", f"{url}/api/v1/mesh/{task_id}/events") as response:
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:") and event == "status":
                status = httpx.Response(200, content=line[len("data:") :].strip()).json().get("status")
                if status in _TERMINAL:
                    return str(status)
    raise RuntimeError(f"SSE stream of task {task_id} ended before a terminal status")


def statuses(store: Any, ids: Sequence[str]) -> dict[str, str]:
    """``{id: status}`` through a ``TaskStore`` (use one on an un-metered client)."""
    out: dict[str, str] = {}
    for task_id in ids:
        task = store.get_task(task_id, enforce_deadline=False)
        out[task_id] = task["status"] if task else "missing"
    return out
