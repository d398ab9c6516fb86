"""The state file of a running ``asya dev``: ``.asya/dev/{manifest file name}.json`` next to the manifest.

``asya dev`` writes it once the mesh is up and removes it when it stops, so other commands (``asya dlq --local``) can
find the mesh's moto endpoint. Content: ``{"namespace", "endpoint_url", "gateway_url", "region", "pid"}``. One file
per manifest file, so meshes of two manifests in one directory each keep theirs; a second ``asya dev`` of the same
manifest is refused while the first runs (:func:`running_dev`). The file is replaced atomically; it is removed only
by the process that wrote it. A file whose ``pid`` is no longer running (``asya dev`` was killed) is reported as
stale.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    from asya_local.mesh import LocalMesh

__all__ = ["STATE_DIR", "LocalState", "dev_state", "local_state", "read_local_state", "running_dev", "state_path"]

#: Relative to the manifest's directory.
STATE_DIR: Final = Path(".asya") / "dev"


@dataclass(frozen=True, slots=True)
class LocalState:
    namespace: str
    endpoint_url: str
    gateway_url: str
    region: str
    pid: int


def state_path(manifest_file: Path | str) -> Path:
    """The state file of the ``asya dev`` serving ``manifest_file``."""
    manifest = Path(manifest_file).resolve()
    return manifest.parent / STATE_DIR / f"{manifest.name}.json"


def running_dev(path: Path) -> LocalState | None:
    """The state in ``path`` when the ``asya dev`` that wrote it still runs; ``None`` when there is no such file, it is
    stale or it is unreadable (a new ``asya dev`` replaces it)."""
    try:
        state = _load(path)
    except (FileNotFoundError, LocalModeError):
        return None
    return state if _alive(state.pid) else None


def dev_state(mesh: LocalMesh, path: Path) -> contextlib.AbstractContextManager[Path]:
    """:func:`local_state` of a running mesh at ``path`` (its manifest's :func:`state_path`), owned by this process."""
    state = LocalState(
        namespace=mesh.manifest.namespace,
        endpoint_url=mesh.endpoint_url,
        gateway_url=mesh.url,
        region=mesh.clients.region,
        pid=os.getpid(),
    )
    return local_state(path, state)


@contextlib.contextmanager
def local_state(path: Path, state: LocalState) -> Iterator[Path]:
    """Write ``state`` to ``path`` for the duration of the block, then remove it (if it is still ours)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{state.pid}.tmp")
    temporary.write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError, LocalModeError):
            if _load(path).pid == state.pid:
                path.unlink()


def read_local_state(path: Path) -> LocalState:
    """The state of the ``asya dev`` that wrote ``path``; :class:`LocalModeError` when there is none or it is gone."""
    try:
        state = _load(path)
    except FileNotFoundError:
        raise LocalModeError(f"no local mesh: {path} does not exist; start one with `asya dev`") from None
    if not _alive(state.pid):
        raise LocalModeError(f"stale {path}: the `asya dev` that wrote it (pid {state.pid}) is not running")
    return state


def _load(path: Path) -> LocalState:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return LocalState(
            namespace=str(data["namespace"]),
            endpoint_url=str(data["endpoint_url"]),
            gateway_url=str(data["gateway_url"]),
            region=str(data["region"]),
            pid=int(data["pid"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise LocalModeError(f"{path} is not a valid asya dev state file: {exc}") from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
