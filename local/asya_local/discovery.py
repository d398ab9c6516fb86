"""Which gateway the ``asya`` commands talk to, and where its local state is.

Order, first match wins (:func:`discover`):

1. ``--url`` given on the command line;
2. the running ``asya dev`` of ``--manifest`` (default ``asya.yaml`` in the working directory): its state file
   ``.asya/dev/{manifest file name}.json`` names the gateway URL it serves (``asya dev --port 8090`` included);
3. when there is no such file, the one running ``asya dev`` among the state files of ``.asya/dev/`` in the
   working directory (two or more running meshes are ambiguous: that step is skipped, and the message of
   :func:`ambiguity` says how to choose);
4. env ``ASYA_URL``;
5. ``http://127.0.0.1:8080``.

Stale state files (their ``asya dev`` was killed) are ignored. :class:`Target` also carries the local state when the
URL came from (or equals the URL of) a running ``asya dev``, so commands that need moto's endpoint (``asya
checkpoint``) use the same mesh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asya_local.localstate import STATE_DIR, LocalState, running_dev, state_path

__all__ = ["DEFAULT_URL", "URL_ENV", "Target", "ambiguity", "discover", "running_meshes"]

DEFAULT_URL: Final = "http://127.0.0.1:8080"
URL_ENV: Final = "ASYA_URL"


@dataclass(frozen=True, slots=True)
class Target:
    """The gateway URL, where it came from (``--url``, a state file's path, ``ASYA_URL`` or ``default``), and the
    ``asya dev`` state behind it when it is a running local mesh."""

    url: str
    source: str
    local: LocalState | None = None


def running_meshes(directory: Path) -> dict[Path, LocalState]:
    """Every state file in ``directory/.asya/dev`` whose ``asya dev`` still runs, by path."""
    found: dict[Path, LocalState] = {}
    state_dir = directory / STATE_DIR
    if not state_dir.is_dir():
        return found
    for path in sorted(state_dir.glob("*.json")):
        state = running_dev(path)
        if state is not None:
            found[path] = state
    return found


def ambiguity(meshes: Mapping[Path, LocalState]) -> str:
    """The hint printed when several local meshes run in one directory."""
    choices = ", ".join(f"{state.gateway_url} ({path.name.removesuffix('.json')})" for path, state in meshes.items())
    return f"several asya dev meshes run here: {choices}; choose one with --manifest or --url"


def discover(*, url: str | None, manifest: str | None, env: Mapping[str, str], cwd: Path) -> tuple[Target, str | None]:
    """The gateway to use, and a warning to print when the choice was ambiguous (else ``None``)."""
    meshes = running_meshes(cwd)
    if url is not None:
        return Target(url, "--url", _state_at(url, meshes)), None
    manifest_file = cwd / (manifest or "asya.yaml")
    own = running_dev(state_path(manifest_file))
    if own is not None:
        return Target(own.gateway_url, str(state_path(manifest_file)), own), None
    warning = None
    if manifest is None and len(meshes) == 1:
        ((path, state),) = meshes.items()
        return Target(state.gateway_url, str(path), state), None
    if manifest is None and len(meshes) > 1:
        warning = ambiguity(meshes)
    from_env = env.get(URL_ENV)
    if from_env:
        return Target(from_env, URL_ENV, _state_at(from_env, meshes)), warning
    return Target(DEFAULT_URL, "default", _state_at(DEFAULT_URL, meshes)), warning


def _state_at(url: str, meshes: Mapping[Path, LocalState]) -> LocalState | None:
    normalized = url.rstrip("/")
    for state in meshes.values():
        if state.gateway_url.rstrip("/") == normalized:
            return state
    return None
