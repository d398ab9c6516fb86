"""Start a function the way the Lambda Web Adapter does: its handler script, then wait for its readiness path.

The adapter is a public layer (``AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap``), not in the assembly, so
:class:`WebAdapterProcess` plays its part: it runs the function's handler (``run.sh``, from its staged code
directory, with ``sh``) with the function's Lambda environment, and polls ``http://127.0.0.1:{PORT}`` +
``AWS_LWA_READINESS_CHECK_PATH`` until it answers a status under 500 (the adapter's default rule). ``PORT`` is the
template's unless it is taken here; then a free port is used (the template's value is what the function listens on
inside its own Lambda sandbox, where no other process competes for it).

The script runs ``python``: a ``python`` on its ``PATH`` starts this machine's interpreter with ``-S -B`` (no
site-packages, so the source tree never joins its path; no bytecode written into the staged code, which Lambda keeps
read-only); ``PYTHONPATH`` carries the layers (``<layer>/python``, dependency layers restaged) as ``/opt/python``
would, and ``LAMBDA_RUNTIME_DIR`` the runtime's boto3.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, Final

import httpx

from asya_local.exceptions import LocalModeError

__all__ = ["WebAdapterProcess"]

_POLL_SECONDS: Final = 0.1


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class WebAdapterProcess:
    """The function's web server, started as the Web Adapter starts it."""

    def __init__(
        self,
        name: str,
        *,
        code_dir: Path,
        handler: str,
        env: Mapping[str, str],
        python_path: list[Path],
        log: IO[str] | None = None,
        taken: Collection[int] = (),
    ) -> None:
        self.name = name
        self._code_dir = code_dir
        self._handler = handler
        self._env = dict(env)
        self._python_path = python_path
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._shim = Path(tempfile.mkdtemp(prefix="asya-lwa-"))
        wanted = int(self._env.get("PORT", "8080"))
        # ``taken``: ports of web functions built but not yet listening (they start concurrently)
        self.port = wanted if wanted not in taken and _free(wanted) else _any_port()
        self.readiness_path = self._env.get("AWS_LWA_READINESS_CHECK_PATH", "/")
        self.invoke_mode = self._env.get("AWS_LWA_INVOKE_MODE", "buffered")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        script = self._code_dir / self._handler
        if not script.is_file():
            raise LocalModeError(f"{self.name}: handler script {script} not found in the staged code")
        python = self._shim / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S -B "$@"\n', encoding="utf-8")
        python.chmod(0o755)
        env = {
            **self._env,
            "PORT": str(self.port),
            "PATH": f"{self._shim}:{self._env.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": os.pathsep.join(str(p) for p in self._python_path),
        }
        self._process = subprocess.Popen(
            ["sh", str(script)],
            cwd=self._code_dir,
            env=env,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if client.get(f"{self.url}{self.readiness_path}").status_code < 500:
                        return
                assert self._process is not None
                if self._process.poll() is not None:
                    raise LocalModeError(f"{self.name}: the web server exited with code {self._process.returncode}")
                if time.monotonic() > deadline:
                    raise LocalModeError(f"{self.name}: {self.readiness_path} did not answer within {timeout} s")
                time.sleep(_POLL_SECONDS)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for entry in self._shim.iterdir():
            entry.unlink()
        with contextlib.suppress(OSError):
            self._shim.rmdir()
