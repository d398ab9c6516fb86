"""``asya dev``: the local mesh of a manifest, kept up to date with its code and its manifest until stopped.

- **Before anything starts** the manifest is loaded and every handler is loaded once
  (:func:`asya_local.preflight.check_mesh`): all problems are reported together and nothing starts.
- **moto** runs in its own child process, owned by this loop rather than by the mesh, so that the mesh can be
  restarted around it. Every ``check_interval`` seconds the loop checks that it still runs; if it died, ``asya dev``
  stops with exit code 2 and says so (its state, all queues, tables and objects, is gone), instead of serving a
  gateway whose every call would fail.
- **Code changes**: the ``*.py`` files under the manifest's code directories are polled every ``check_interval``
  seconds (:class:`asya_local.reload.CodeWatcher`); on a change the loop logs the files and the modules it reloads,
  and each user actor's runtime is rebuilt before its next invocation (an invocation in progress finishes on the old
  code). A message redriven from a DLQ after a fix runs the new code.
- **Manifest changes** (its modification time or size, or those of a flow file it names as ``source``: a flow
  written as Python compiles when the manifest loads; the loop says which flow file changed) restart the mesh: the
  new manifest is loaded and checked first (its flows compiled in a child process, P-FLOW-22); when it cannot be
  used, for any reason, the error is logged and the running mesh keeps serving the previous one. Otherwise the
  actors' pollers (first: they take no new message, calls under way finish), the gateway and the backstop stop,
  and a new mesh starts **against the same moto** on the same
  URL: moto's state survives the restart (it is never snapshotted; nothing is written to disk): tasks, queued
  messages, DLQs, checkpoints and the run history (in the bucket, P-HIST-10) are all still there, and new queues are
  created for new actors.
- **Flow source changes** (a ``flows.<name>.source`` file) restart the mesh the same way, so the flow is compiled
  again. A task started before keeps the program it started with, paused ones included: its flow state names the
  program's digest, the gateway kept that program in the bucket (``flows/{digest}.json``, P-FLOWV-3), and the
  restarted actors read it from there, exactly as in AWS after a deploy. Tasks created after the restart run the
  new program.
- The state file (``asya_local.localstate``) is written once the mesh is up, rewritten after a restart, and removed
  at the end.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from asya.exceptions import AsyaError
from asya.manifest import Manifest, load_manifest
from asya_local.exceptions import LocalModeError
from asya_local.localstate import dev_state, running_dev, state_path
from asya_local.mesh import LocalMesh
from asya_local.moto_server import MotoServer
from asya_local.preflight import check_mesh
from asya_local.reload import CodeWatcher, syntax_problems

__all__ = ["DevLoop", "DevOptions"]

_CHECK_SECONDS: Final = 0.5


@dataclass(frozen=True, slots=True)
class DevOptions:
    manifest: str
    host: str = "127.0.0.1"
    port: int = 8080
    gateway_env: Mapping[str, str] | None = None
    check_interval: float = _CHECK_SECONDS


class DevLoop:
    """Runs the mesh of ``options.manifest`` until interrupted (``KeyboardInterrupt``) or moto dies."""

    def __init__(self, options: DevOptions, *, out: TextIO, err: TextIO, stop: threading.Event | None = None) -> None:
        self._options = options
        self._out = out
        self._err = err
        self._stop = stop or threading.Event()
        self._manifest_path = Path(options.manifest)
        self._state_file = state_path(options.manifest)

    def run(self) -> int:
        other = running_dev(self._state_file)  # first: no handler is loaded for a mesh that is already served
        if other is not None:
            raise LocalModeError(
                f"another asya dev (pid {other.pid}) is serving {self._options.manifest} at {other.gateway_url}; "
                "stop it first"
            )
        manifest = self._load()
        watcher = CodeWatcher(_code_dirs(manifest))
        with MotoServer(host="127.0.0.1", port=0) as moto, contextlib.ExitStack() as stack:
            mesh = stack.enter_context(self._mesh(manifest, moto, watcher, port=self._options.port))
            state = stack.enter_context(contextlib.ExitStack())
            state.enter_context(dev_state(mesh, self._state_file))
            self._out.write(f"{mesh.url}\n")
            self._out.flush()
            self._note(
                f"mesh {manifest.namespace!r} is up at {mesh.url} (web console: {mesh.url}/console/); "
                "press Ctrl-C to stop"
            )
            stamp = _sources_stamp(self._manifest_path, manifest)
            try:
                while not self._stop.wait(self._options.check_interval):
                    problem = moto.problem()
                    if problem is not None:
                        self._error(f"{problem}; asya dev stops (start it again for a fresh mesh)")
                        return 2
                    change = watcher.poll()
                    if change is not None:
                        files = ", ".join(_shown(path, self._manifest_path.parent) for path in change.files)
                        modules = ", ".join(change.modules) or "none loaded yet"
                        self._note(f"code changed ({files}): reloading {modules} before each actor's next invocation")
                        for problem in syntax_problems(change.files, root=self._manifest_path.parent):
                            self._error(f"{problem} (actors using it fail until it is fixed)")
                    current = _sources_stamp(self._manifest_path, manifest)
                    if not self._say_changed(manifest, stamp, current):
                        continue
                    stamp = current
                    replacement = self.reloaded_manifest()
                    if replacement is None:
                        continue
                    manifest = replacement
                    port = int(mesh.url.rsplit(":", 1)[1])
                    state.close()
                    stack.close()
                    watcher.watch(_code_dirs(manifest))
                    mesh = stack.enter_context(self._mesh(manifest, moto, watcher, port=port))
                    state = stack.enter_context(contextlib.ExitStack())
                    state.enter_context(dev_state(mesh, self._state_file))
                    self._note(f"mesh {manifest.namespace!r} restarted at {mesh.url}; moto's state was kept")
                    stamp = _sources_stamp(self._manifest_path, manifest)  # the new manifest may name other files
            except KeyboardInterrupt:
                self._note("stopping")
        return 0

    def _load(self) -> Manifest:
        """The manifest, loaded and checked; any failure is a :class:`LocalModeError` naming the file, so neither the
        start nor a reload ever ends in a traceback."""
        try:
            manifest = load_manifest(self._options.manifest)
            check_mesh(manifest, source=self._options.manifest, instantiate=True)
        except AsyaError:
            raise
        except Exception as exc:
            raise LocalModeError(f"{self._options.manifest}: cannot be used: {type(exc).__name__}: {exc}") from exc
        return manifest

    def reloaded_manifest(self) -> Manifest | None:
        """The changed manifest, loaded and checked; ``None`` (the error reported) when it cannot be used, whatever
        the reason: the running mesh then keeps serving the previous one."""
        try:
            manifest = self._load()
        except Exception as exc:  # any failure of a new manifest must leave the running mesh (and moto) alone
            detail = str(exc) if isinstance(exc, AsyaError) else f"{type(exc).__name__}: {exc}"
            self._error(
                f"{self._options.manifest} changed but cannot be used; still serving the previous one:\n{detail}"
            )
            return None
        self._note(
            f"{self._options.manifest} or a flow source changed: restarting the mesh (moto and its state stay; "
            "tasks started before keep the flow programs they started with)"
        )
        return manifest

    def _say_changed(self, manifest: Manifest, before: _Stamps, after: _Stamps) -> bool:
        """Whether the manifest or a flow file changed; names each changed flow file (the manifest's own change is
        said when it is reloaded)."""
        changed = [path for path in before.keys() | after.keys() if before.get(path) != after.get(path)]
        flows = {path: name for name, path in _flow_files(manifest)}
        for path in sorted(p for p in changed if p in flows):
            self._note(
                f"{_shown(path, self._manifest_path.parent)} changed (flow {flows[path]!r}): recompiling it with "
                f"{self._options.manifest}"
            )
        return bool(changed)

    def _mesh(self, manifest: Manifest, moto: MotoServer, watcher: CodeWatcher, *, port: int) -> LocalMesh:
        return LocalMesh(
            manifest,
            host=self._options.host,
            port=port,
            endpoint_url=moto.endpoint_url,
            gateway_env=self._options.gateway_env,
            record_history=True,
            watcher=watcher,
            moto_problem=moto.problem,
        )

    def _note(self, text: str) -> None:
        self._err.write(f"asya dev: {text}\n")
        self._err.flush()

    def _error(self, text: str) -> None:
        self._err.write(f"asya: {text}\n")
        self._err.flush()


def _code_dirs(manifest: Manifest) -> list[Path]:
    return [manifest.code_dir(name) for name in manifest.actors]


_Stamps = dict[Path, tuple[int, int] | None]


def _flow_files(manifest: Manifest) -> list[tuple[str, Path]]:
    """``(flow, file)`` of every flow written as Python: it compiles when the manifest loads, so it reloads with it."""
    return [
        (name, (manifest.base_dir / spec.source).resolve())
        for name, spec in manifest.flows.items()
        if spec.source is not None
    ]


def _sources_stamp(manifest_path: Path, manifest: Manifest) -> _Stamps:
    """The stamps of the manifest and of its flow files."""
    files = [manifest_path.resolve(), *(path for _, path in _flow_files(manifest))]
    return {path: _stamp(path) for path in files}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _shown(path: Path, base: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(base.resolve()))
    return str(path)
