"""The test client shipped for users' own tests: a whole local mesh of their manifest, called over HTTP.

::

    from asya_local.testing import run_mesh

    def test_greet():
        with run_mesh("asya.yaml") as mesh:
            view = mesh.call("hello", {"name": "Ada"})
            assert view["status"] == "succeeded"
            assert view["result"] == {"greeting": "Hello, Ada!"}

:func:`run_mesh` checks the manifest and loads every handler first (``asya_local.preflight``: all problems in one
error), then starts moto, the actors and the gateway on a free port (``asya_local.mesh.LocalMesh``) with a run
history, and stops everything when the block ends. :meth:`MeshClient.call` creates a task (a flow, or one actor with
``actor=``), follows its event stream to the end and returns the task view (GW-TASK-1); :meth:`MeshClient.history`
returns its run history. A relative manifest path is taken from the working directory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asya.manifest import load_manifest
from asya_local.client import GatewayClient
from asya_local.history import RunHistory
from asya_local.mesh import LocalMesh
from asya_local.preflight import check_mesh

__all__ = ["MeshClient", "run_mesh"]


class MeshClient:
    """Calls to one running local mesh."""

    def __init__(self, mesh: LocalMesh, client: GatewayClient) -> None:
        self.mesh = mesh
        self.url = mesh.url
        self._client = client

    def call(
        self, flow: str | None = None, payload: Any = None, *, actor: str | None = None, timeout: int = 60
    ) -> dict[str, Any]:
        """Run a task to its end and return its task view; ``timeout`` is the task's deadline in seconds."""
        if (flow is None) == (actor is None):
            raise ValueError(f"give exactly one of flow and actor, got flow={flow!r}, actor={actor!r}")
        created = self._client.create(flow=flow, actor=actor, payload=payload, timeout=timeout)
        task_id = str(created["id"])
        for _ in self._client.events(task_id).events():
            pass
        return self._client.get(task_id)

    def history(self, task_id: str) -> dict[str, Any]:
        """What each actor received and sent for ``task_id`` (``GET /api/v1/dev/history/{id}``)."""
        return self._client.history(task_id)


@contextlib.contextmanager
def run_mesh(manifest: str | Path = "asya.yaml") -> Iterator[MeshClient]:
    """The mesh of ``manifest`` running for the duration of the block."""
    loaded = load_manifest(manifest)
    check_mesh(loaded, source=str(manifest), instantiate=True)
    history = RunHistory(namespace=loaded.namespace)
    with (
        LocalMesh(loaded, port=0, history=history, backstop_interval=1.0) as mesh,
        GatewayClient(mesh.url) as client,
    ):
        yield MeshClient(mesh, client)
