"""Content-addressed staging directories: the steps the gateway asset, the compiled sidecar layer and the dependency
layers share (``asya_cdk.assets``, ``asya_cdk.bytecode``, ``asya_cdk.dependencies``).

- :func:`tree_files`: the files of a source tree that are staged, sorted; never tool caches (``__pycache__``,
  ``.mypy_cache``, ``.pytest_cache``, ``.ruff_cache``) nor stray ``.pyc`` files, whose content depends on this machine;
- :func:`content_name`: ``{name}-{hash}``, the first 20 hex digits of the sha256 of ``before``, then each file's
  POSIX path relative to the tree, a NUL, its bytes and a NUL, then ``after``: a changed byte names a new directory;
- :func:`build_once`: the directory ``target``, filled by a callback the first time only. It is built under a
  temporary name beside ``target`` (mode 0755, like any asset directory) and renamed into place, so an interrupted or
  concurrent build never leaves a half-filled directory behind; a build that loses the race to a concurrent one
  keeps the winner's (its content is the same, by its name). A failing callback propagates and leaves nothing;
- :func:`copy_files`: the files into a scratch directory, keeping their relative paths and metadata.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

__all__ = ["build_once", "content_name", "copy_files", "tree_files"]

_SKIP_PARTS: Final = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_HASH_DIGITS: Final = 20


def tree_files(root: Path) -> list[Path]:
    """The files under ``root`` that are staged, sorted by path."""
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not _SKIP_PARTS.intersection(path.relative_to(root).parts) and path.suffix != ".pyc"
    ]


def content_name(name: str, root: Path, files: Sequence[Path], *, before: bytes = b"", after: bytes = b"") -> str:
    """``{name}-{hash}`` of ``files`` (under ``root``) between ``before`` and ``after``."""
    digest = hashlib.sha256(before)
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(after)
    return f"{name}-{digest.hexdigest()[:_HASH_DIGITS]}"


def build_once(target: Path, fill: Callable[[Path], None]) -> Path:
    """``target``, built by ``fill(scratch)`` and renamed into place unless it exists already."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        fill(scratch)
        scratch.chmod(0o755)
        try:
            scratch.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def copy_files(root: Path, files: Sequence[Path], dest: Path) -> None:
    """Copy ``files`` (under ``root``) to the same relative paths under ``dest``."""
    for path in files:
        copy = dest / path.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
