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
``actor=``), follows its event stream until the task ends or pauses and returns the task view (GW-TASK-1);
:meth:`MeshClient.resume` resumes a paused task and follows it the same way; :meth:`MeshClient.history` returns its
run history. A relative manifest path is taken from the working directory.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asya.manifest import load_manifest
from asya_gateway.routes.resume import NO_ENVELOPE
from asya_local.client import GatewayClient
from asya_local.exceptions import GatewayHttpError
from asya_local.mesh import LocalMesh
from asya_local.preflight import check_mesh
from asya_local.sse import event_status

__all__ = ["MeshClient", "run_mesh"]

#: How long :meth:`MeshClient.resume` waits for x-pause to store a just-paused task's envelope.
_STORE_WAIT_SECONDS = 60.0


class MeshClient:
    """Calls to one running local mesh."""

    def __init__(self, mesh: LocalMesh, client: GatewayClient) -> None:
        self.mesh = mesh
        self.url = mesh.url
        self._client = client

    def call(
        self, flow: str | None = None, payload: Any = None, *, actor: str | None = None, timeout: int = 60
    ) -> dict[str, Any]:
        """Run a task until it ends or pauses and return its task view; ``timeout`` is the task's deadline in
        seconds. A paused task's view has ``status`` ``paused``: :meth:`resume` it with the reviewer's input."""
        if (flow is None) == (actor is None):
            raise ValueError(f"give exactly one of flow and actor, got flow={flow!r}, actor={actor!r}")
        created = self._client.create(flow=flow, actor=actor, payload=payload, timeout=timeout)
        return self._follow(str(created["id"]))

    def resume(self, task_id: str, value: dict[str, Any], *, timeout: int | None = None) -> dict[str, Any]:
        """Resume a paused task with ``value`` (``POST /api/v1/mesh/{id}/resume``, GW-RESUME-1..4), then follow it
        until it ends or pauses again, and return its task view."""
        deadline = time.monotonic() + _STORE_WAIT_SECONDS
        while True:
            try:
                self._client.resume(task_id, value, timeout=timeout)
                break
            except GatewayHttpError as exc:
                # x-pause stores the paused envelope just after the paused status (P-PAUSE-5): wait for it
                if exc.status_code != 409 or exc.message != NO_ENVELOPE or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        return self._follow(task_id, after_resume=True)

    def _follow(self, task_id: str, *, after_resume: bool = False) -> dict[str, Any]:
        """Follow the task's events until a terminal status (the stream ends) or a pause, then read its view. After a
        resume the catch-up may still show the pause it left, so only a live ``paused`` event (one with an id) or a
        paused view read after it stops the follower there."""
        for event in self._client.events(task_id).events():
            if event_status(event) == "paused" and (event.id is not None or not after_resume):
                view = self._client.get(task_id)
                if view["status"] == "paused":
                    return view
        return self._client.get(task_id)

    def history(self, task_id: str) -> dict[str, Any]:
        """What each actor received and sent for ``task_id`` (``GET /api/v1/mesh/{id}/history``: the mesh records
        every task's run history, P-HIST-10). Read it once the task has ended; an invocation still writing its line is
        counted in ``missing_objects``."""
        return self._client.history(task_id)


@contextlib.contextmanager
def run_mesh(manifest: str | Path = "asya.yaml") -> Iterator[MeshClient]:
    """The mesh of ``manifest`` running for the duration of the block."""
    loaded = load_manifest(manifest)
    check_mesh(loaded, source=str(manifest), instantiate=True)
    with (
        LocalMesh(loaded, port=0, record_history=True, backstop_interval=1.0) as mesh,
        GatewayClient(mesh.url) as client,
    ):
        yield MeshClient(mesh, client)
