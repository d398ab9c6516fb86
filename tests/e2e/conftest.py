"""e2e fixtures: a ``LocalMesh`` (moto server, actor runtimes behind ESM emulators, the gateway on a free port),
helpers that follow a task over HTTP the way a client does, and ``asya dev`` run as a child process."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya.manifest import Manifest, load_manifest
from asya_local.client import GatewayClient
from asya_local.mesh import LocalMesh
from asya_local.sse import SseEvent

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parent.parent


@pytest.fixture(scope="module")
def local_mesh(example_manifest: Manifest) -> Iterator[LocalMesh]:
    """The example mesh running in-process (moto in its child process), gateway on 127.0.0.1 and a free port. One per
    test module: a mesh takes a second or two to start."""
    with LocalMesh(example_manifest, port=0) as mesh:
        yield mesh


@pytest.fixture(scope="module")
def failing_manifest() -> Manifest:
    return load_manifest(E2E_DIR / "failing" / "asya.yaml")


@pytest.fixture(scope="module")
def failing_mesh(failing_manifest: Manifest) -> Iterator[LocalMesh]:
    with LocalMesh(failing_manifest, port=0) as mesh:
        yield mesh


@pytest.fixture(scope="module")
def flaky_mesh() -> Iterator[LocalMesh]:
    """A mesh whose ``flaky`` actor fails twice per task, with a retry policy (tests/e2e/flaky/asya.yaml)."""
    with LocalMesh(load_manifest(E2E_DIR / "flaky" / "asya.yaml"), port=0) as mesh:
        yield mesh


@dataclass(frozen=True)
class Gateway:
    """A client of one running gateway, asserting the HTTP contract on the way."""

    url: str

    def create(self, *, flow: str, payload: Any) -> str:
        response = httpx.post(f"{self.url}/api/v1/mesh/", params={"flow": flow}, json={"payload": payload}, timeout=10)
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["status"] == "pending"
        assert response.headers["location"] == f"/api/v1/mesh/{body['id']}"
        return str(body["id"])

    def follow(self, task_id: str) -> list[SseEvent]:
        """Every SSE event of the task until its terminal status (GW-SSE-7)."""
        with GatewayClient(self.url) as client:
            return list(client.events(task_id).events())

    def get(self, task_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/api/v1/mesh/{task_id}", timeout=10)
        assert response.status_code == 200, response.text
        body = response.json()
        assert isinstance(body, dict)
        return body


@pytest.fixture
def gateway(local_mesh: LocalMesh) -> Gateway:
    return Gateway(local_mesh.url)


@pytest.fixture
def failing_gateway(failing_mesh: LocalMesh) -> Gateway:
    return Gateway(failing_mesh.url)


@pytest.fixture
def flaky_gateway(flaky_mesh: LocalMesh) -> Gateway:
    return Gateway(flaky_mesh.url)


@dataclass(frozen=True)
class DevProcess:
    """A running ``asya dev``: its process, the gateway URL it printed and its stderr log file."""

    proc: subprocess.Popen[str]
    url: str
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8")


def _default_sigint() -> None:
    # A runner started in the background by a non-interactive shell ignores SIGINT, and a child inherits that, so
    # Ctrl-C's signal would never reach `asya dev`. The child starts as it would from a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _run_dev(manifest: Path | str, *, cwd: Path, log: Path, watchdog: float = 300) -> Iterator[DevProcess]:
    """``asya dev --manifest <manifest> --port 0`` in ``cwd`` until the block ends, then Ctrl-C (kill after 60 s).
    Its stdout is the caller's to read (the URL line is already consumed); ``watchdog`` seconds in, it is killed."""
    with (
        log.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-m", "asya_local", "dev", "--manifest", str(manifest), "--port", "0"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=_default_sigint,  # noqa: PLW1509 - resets one signal disposition, takes no lock
        ) as proc,
    ):
        timer = threading.Timer(watchdog, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), log.read_text(encoding="utf-8")
            yield DevProcess(proc, url, log)
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()


@pytest.fixture
def run_dev() -> Callable[..., contextlib.AbstractContextManager[DevProcess]]:
    """``run_dev(manifest, cwd=..., log=..., watchdog=300)``: a context manager running ``asya dev``."""
    return _run_dev
