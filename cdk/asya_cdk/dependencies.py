"""Dependency layers built by CDK's own asset bundling, locally and without Docker, from committed lock files.

:func:`locked_layer_code` returns the ``lambda_.Code`` of a layer: an asset whose hash is the lock file's sha256
(:mod:`asya_cdk.locks`) and whose bundling is local (:class:`LockedLayerBundling`, an ``ILocalBundling``). The
mesh's own code runs no pip: CDK calls the bundling when it stages the asset, only for the stacks it bundles, and only
when the asset is not already staged in that output directory. The bundling then takes the layer from the cache
``<staging>/deps-<lock hash>/`` or builds it there once with::

    pip install --require-hashes --no-deps --platform manylinux2014_aarch64 --implementation cp \
        --python-version X.Y --only-binary=:all: --no-compile --target <cache>/deps-<hash>/python -r <lock>

and hard-links (or copies) it into CDK's output directory, so repeated synths, into any output directory, reuse one
build. CDK runs the bundling while it stages the asset, so ``cdk ls`` / ``cdk diff -e`` of other stacks skip it
(context ``aws:cdk:bundling-stacks``). Every installed file is pinned by hash; a changed lock builds a new
directory. A cache directory is built under a temporary name and renamed into place, so an interrupted or concurrent
build never leaves a half-filled entry behind. pip compiles nothing (``--no-compile``: it would write bytecode for
this machine's Python); :mod:`asya_cdk.bytecode` compiles the layer when this interpreter matches the runtime.

What each layer ships, and its top-level pins from ``pyproject.toml``, are the lock's inputs
(:mod:`asya_cdk.locks`): the layers ship exactly the versions the tests ran, and
:func:`~asya_cdk.locks.check_lock` refuses a lock resolved from other pins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from asya_cdk.bytecode import compile_tree
from asya_cdk.errors import DependencyBuildError
from asya_cdk.locks import LAMBDA_PLATFORM, Lock
from asya_cdk.staging import build_once

__all__ = [
    "LAMBDA_PLATFORM",
    "DependencyBuilder",
    "LockedLayerBundling",
    "locked_layer_code",
]

#: Bump when the layout of a built directory changes, so old cache entries are not reused.
_FORMAT_VERSION: Final = "2"
#: CDK requires an image even for local bundling; it is never pulled because the local bundling always succeeds.
_UNUSED_IMAGE: Final = DockerImage.from_registry("asya/local-bundling-only")


@dataclass(frozen=True, slots=True)
class DependencyBuilder:
    """Builds and caches layer directories for the Lambda platform. ``pip`` is the command prefix that runs pip."""

    cache_dir: Path
    python_version: str
    platform: str = LAMBDA_PLATFORM
    pip: tuple[str, ...] = field(default=(sys.executable, "-m", "pip"))
    #: Compile the layer (``asya_cdk.bytecode``): only when this interpreter matches ``python_version``.
    compile_bytecode: bool = False

    def key(self, lock: Lock) -> str:
        """Content hash naming the cache entry (and the CDK asset) of ``lock``."""
        return f"{_FORMAT_VERSION}{'c' if self.compile_bytecode else 's'}{lock.digest[:18]}"

    def layer_dir(self, lock: Lock) -> Path:
        return self.cache_dir / f"deps-{self.key(lock)}"

    def build(self, lock: Lock) -> Path:
        """Return the layer directory of ``lock``, building it when it is not cached yet."""

        def fill(scratch: Path) -> None:
            self._pip_install(lock, scratch / "python")
            # Console scripts (uvicorn, jp.py) are useless in a layer and pip wrote them for this machine's Python.
            shutil.rmtree(scratch / "python" / "bin", ignore_errors=True)
            if self.compile_bytecode:
                compile_tree(scratch / "python")
            shutil.copyfile(lock.path, scratch / "requirements.lock.txt")

        return build_once(self.layer_dir(lock), fill)

    def _pip_install(self, lock: Lock, dest: Path) -> None:
        command = [
            *self.pip,
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--no-deps",
            "--require-hashes",
            "--platform",
            self.platform,
            "--implementation",
            "cp",
            "--python-version",
            self.python_version,
            "--only-binary=:all:",
            "--target",
            str(dest),
            "-r",
            str(lock.path),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            raise DependencyBuildError(
                f"building the dependencies layer failed (exit {result.returncode}): {' '.join(command)}\n"
                f"{output[-4000:]}"
            )


@jsii.implements(ILocalBundling)
class LockedLayerBundling:
    """CDK local bundling of one lock: the cached build, linked into CDK's output directory."""

    def __init__(self, builder: DependencyBuilder, lock: Lock) -> None:
        self._builder = builder
        self._lock = lock

    def try_bundle(self, output_dir: str, *_options: Any, **_keywords: Any) -> bool:
        # jsii passes the asset's bundling options positionally; the lock alone decides what is built
        built = self._builder.build(self._lock)
        _link_tree(built, Path(output_dir))
        return True


def locked_layer_code(builder: DependencyBuilder, lock: Lock) -> lambda_.Code:
    """The layer asset of ``lock``: hashed by the lock, bundled locally at synth."""
    return lambda_.Code.from_asset(
        str(lock.path.parent),
        asset_hash=builder.key(lock),
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(image=_UNUSED_IMAGE, local=LockedLayerBundling(builder, lock)),
    )


def _link_tree(source: Path, dest: Path) -> None:
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:  # another filesystem: copy
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link, dirs_exist_ok=True)
