"""Dependency layers built without Docker, cached by a content hash.

``DependencyBuilder.build(requirements)`` runs::

    pip install --platform manylinux2014_aarch64 --implementation cp --python-version X.Y \
        --only-binary=:all: --no-compile --target <cache>/deps-<hash>/python <requirements>

once per distinct requirement list, into ``<cache>/deps-<hash>/`` (the layer's root: Lambda unpacks ``python/`` to
``/opt/python``). The hash covers the pinned requirement strings, the platform, the Python version and the builder's
format version, so a changed pin builds a new directory and an unchanged one is reused without touching the network.
The directory is built under a temporary name and renamed into place, so an interrupted or concurrent build never
leaves a half-filled cache entry behind.

Pins come from ``pyproject.toml`` (``[project].dependencies``): the layers ship exactly the versions the tests ran.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from asya_cdk.errors import DependencyBuildError, DeploymentError

__all__ = [
    "ACTOR_REQUIREMENTS",
    "GATEWAY_REQUIREMENTS",
    "LAMBDA_PLATFORM",
    "DependencyBuilder",
    "pinned_requirements",
]

#: Packages of the actor layer (sidecar and crew). boto3 comes with the Lambda runtime; pydantic is not needed on the
#: actor hot path (actors get their configuration from environment variables, ``asya.config``).
ACTOR_REQUIREMENTS: Final = ("aws-lambda-powertools",)
#: Packages of the gateway layer: the ASGI app, its server, the manifest model, input-schema validation and JWT
#: verification (GW-AUTH-5).
GATEWAY_REQUIREMENTS: Final = (
    "aws-lambda-powertools",
    "pydantic",
    "pyyaml",
    "jsonschema",
    "starlette",
    "uvicorn",
    "joserfc",
)

LAMBDA_PLATFORM: Final = "manylinux2014_aarch64"
#: Bump when the layout of a built directory changes, so old cache entries are not reused.
_FORMAT_VERSION: Final = "1"
_NAME_RE: Final = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements(names: Sequence[str], *, pyproject: Path) -> tuple[str, ...]:
    """The requirement strings of ``names`` as pinned in ``pyproject``'s ``[project].dependencies``.

    Raises :class:`DeploymentError` when a name is not listed there.
    """
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DeploymentError(f"cannot read the dependency pins from {pyproject}: {exc}") from None
    pins: dict[str, str] = {}
    for spec in data.get("project", {}).get("dependencies", []):
        match = _NAME_RE.match(spec)
        if match:
            pins[_normalize(match.group(1))] = spec.strip()
    missing = [name for name in names if _normalize(name) not in pins]
    if missing:
        raise DeploymentError(
            f"layer requirements {missing} are not pinned in {pyproject} [project].dependencies; add them there"
        )
    return tuple(pins[_normalize(name)] for name in names)


@dataclass(frozen=True, slots=True)
class DependencyBuilder:
    """Builds and caches layer directories for the Lambda platform. ``pip`` is the command prefix that runs pip."""

    cache_dir: Path
    python_version: str
    platform: str = LAMBDA_PLATFORM
    pip: tuple[str, ...] = field(default=(sys.executable, "-m", "pip"))

    def key(self, requirements: Sequence[str]) -> str:
        """Content hash naming the cache entry of ``requirements``."""
        material = "\n".join(
            [_FORMAT_VERSION, self.platform, self.python_version, *sorted(r.strip() for r in requirements)]
        )
        return hashlib.sha256(material.encode()).hexdigest()[:20]

    def layer_dir(self, requirements: Sequence[str]) -> Path:
        return self.cache_dir / f"deps-{self.key(requirements)}"

    def build(self, requirements: Sequence[str]) -> Path:
        """Return the layer directory of ``requirements``, building it when it is not cached yet."""
        if not requirements:
            raise DeploymentError("a dependencies layer needs at least one requirement")
        target = self.layer_dir(requirements)
        if target.is_dir():
            return target
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=self.cache_dir))
        try:
            self._pip_install(requirements, scratch / "python")
            # Console scripts (uvicorn, jp.py) are useless in a layer and pip wrote them for this machine's Python.
            shutil.rmtree(scratch / "python" / "bin", ignore_errors=True)
            (scratch / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
            try:
                scratch.rename(target)
            except OSError:
                if not target.is_dir():
                    raise
                # Another process finished the same build first; its result is identical.
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return target

    def _pip_install(self, requirements: Sequence[str], dest: Path) -> None:
        command = [
            *self.pip,
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--platform",
            self.platform,
            "--implementation",
            "cp",
            "--python-version",
            self.python_version,
            "--only-binary=:all:",
            "--target",
            str(dest),
            *requirements,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            raise DependencyBuildError(
                f"building the dependencies layer failed (exit {result.returncode}): {' '.join(command)}\n"
                f"{output[-4000:]}"
            )
