"""Restage the dependency layers of a cloud assembly for this machine's Python.

A dependency layer in ``cdk.out`` is built for the Lambda runtime (its ``requirements.lock.txt`` names the platform,
e.g. Python 3.14 on arm64), so its compiled modules cannot load here. :class:`Restager` rebuilds each such layer for
the host from that layer's own lock, into ``<cache>/deps-<key>/python`` where ``key`` hashes the lock text and the
host's interpreter tag, so a run reuses what an earlier run built. Each locked ``name==version`` is taken from the
host's own installed distribution when its version is the locked one (its ``RECORD`` files are copied), else
installed by ``pip install --no-deps --only-binary=:all: name==version``. Nothing else enters the directory: a module
missing from a layer's lock fails to import here as it would in Lambda. :meth:`Restager.check` compares the restaged
top-level names with the layer's own (the Lambda build's) and fails on any difference.

Lambda's Python runtime itself provides boto3 and its dependencies (``/var/runtime``); :meth:`Restager.runtime_dir`
stages the host's copies of exactly :data:`RUNTIME_DISTRIBUTIONS` into ``<cache>/runtime-<key>/``.

Code layers (no lock file: ``asya``, the crew, the gateway) are never restaged: they are used as staged.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from asya_local.exceptions import LocalModeError

__all__ = ["LOCK_FILE", "RUNTIME_DISTRIBUTIONS", "RestageError", "Restager", "is_dependency_layer"]

#: The file a dependency layer carries at its root (``asya_cdk.dependencies``).
LOCK_FILE: Final = "requirements.lock.txt"
#: What Lambda's Python runtime ships beside the function (``/var/runtime``).
RUNTIME_DISTRIBUTIONS: Final = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six")
_FORMAT: Final = "1"


class RestageError(LocalModeError):
    """A dependency layer could not be restaged for this machine, or its restaged content differs from the layer's."""


def is_dependency_layer(layer_dir: Path) -> bool:
    return (layer_dir / LOCK_FILE).is_file()


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked(lock_text: str) -> list[tuple[str, str]]:
    pins = []
    for raw in lock_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        spec = line.split()[0]
        name, _, version = spec.partition("==")
        if not version:
            raise RestageError(f"lock line {line!r} is not name==version")
        pins.append((name, version))
    return pins


def _host_tag() -> str:
    return f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"


def top_level_names(directory: Path) -> set[str]:
    """Importable top-level names of a site directory (packages and modules, ``.dist-info`` and ``bin`` left out)."""
    names = set()
    for entry in directory.iterdir():
        if entry.name.endswith((".dist-info", ".egg-info")) or entry.name in ("bin", "__pycache__"):
            continue
        if entry.is_dir():
            names.add(entry.name)
        elif entry.suffix in (".py", ".so", ".pth"):
            names.add(entry.name.split(".")[0])
    return names


class Restager:
    """Builds restaged layer directories under ``cache_dir`` (created on demand)."""

    def __init__(self, cache_dir: Path, *, pip: tuple[str, ...] = (sys.executable, "-m", "pip")) -> None:
        self.cache_dir = cache_dir
        self._pip = pip

    def restage(self, layer_dir: Path) -> Path:
        """The host build of the dependency layer at ``layer_dir`` (its ``python`` directory), built once."""
        lock_text = (layer_dir / LOCK_FILE).read_text(encoding="utf-8")
        key = hashlib.sha256(f"{_FORMAT}\n{_host_tag()}\n{lock_text}".encode()).hexdigest()[:20]
        target = self.cache_dir / f"deps-{key}"
        if not target.is_dir():
            self._build(target, _locked(lock_text))
        site = target / "python"
        self.check(layer_dir, site)
        return site

    def runtime_dir(self) -> Path:
        """The host's copies of what Lambda's runtime provides (:data:`RUNTIME_DISTRIBUTIONS`)."""
        pins = [(name, importlib.metadata.version(name)) for name in RUNTIME_DISTRIBUTIONS]
        key = hashlib.sha256(f"{_FORMAT}\n{_host_tag()}\n{pins}".encode()).hexdigest()[:20]
        target = self.cache_dir / f"runtime-{key}"
        if not target.is_dir():
            self._build(target, pins)
        return target / "python"

    def check(self, layer_dir: Path, site: Path) -> None:
        """The restaged directory provides exactly the top-level names of the Lambda build of the layer."""
        built = layer_dir / "python"
        if not built.is_dir():
            return
        expected, found = top_level_names(built), top_level_names(site)
        if expected != found:
            raise RestageError(
                f"{layer_dir.name}: the restaged layer differs from the synthesized one: missing "
                f"{sorted(expected - found)}, extra {sorted(found - expected)}"
            )

    def _build(self, target: Path, pins: Iterable[tuple[str, str]]) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=self.cache_dir))
        try:
            site = scratch / "python"
            site.mkdir()
            missing = [(name, version) for name, version in pins if not _copy_installed(name, version, site)]
            if missing:
                self._pip_install(missing, site)
            shutil.rmtree(site / "bin", ignore_errors=True)
            try:
                scratch.rename(target)
            except OSError:
                if not target.is_dir():  # another process won the race: its copy is as good
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _pip_install(self, pins: list[tuple[str, str]], site: Path) -> None:
        command = [
            *self._pip,
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "--target",
            str(site),
            *(f"{name}=={version}" for name, version in pins),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RestageError(f"restaging {pins} failed: {' '.join(command)}\n{result.stderr[-3000:]}")


def _copy_installed(name: str, version: str, site: Path) -> bool:
    """Copy the host's installed ``name`` into ``site`` when it is exactly ``version``; False otherwise."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    if dist.version != version or dist.files is None:
        return False
    for file in dist.files:
        parts = Path(str(file)).parts
        if not parts or parts[0] == ".." or "__pycache__" in parts or file.name.endswith(".pth"):
            continue
        if parts[0].endswith(".dist-info") and file.name in ("direct_url.json", "INSTALLER", "REQUESTED"):
            continue
        source = Path(str(file.locate()))
        if not source.is_file():
            continue
        dest = site / Path(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
    return True
