"""Reloading handler code between invocations, for ``asya dev``.

:class:`CodeWatcher` watches the ``*.py`` files under the manifest's code directories (by modification time and
size, polled: no extra dependency, and it works on every file system), skipping hidden directories, virtual
environments, ``site-packages``, ``node_modules``, caches and build output. :meth:`CodeWatcher.poll`, called by the
dev loop, returns what changed: the changed files and the modules it forgot. On a change every module loaded from a
watched file is removed from ``sys.modules`` (not only the changed file's: a handler module keeps references to the
helpers it imported, which must be fresh too), except the mesh's own packages (``asya``, ``asya_crew``, ...), and
:attr:`CodeWatcher.generation` goes up by one.

:class:`ReloadingHandler` is what an event source mapping calls for a user actor: before each invocation, when the
generation moved, it builds a new runtime (``factory``), whose ``load_handler`` imports the code afresh and, for a
``module.Class.method`` handler, creates a new instance. An invocation in progress finishes on the code it started
with; nothing is reloaded in the middle of one.

:func:`syntax_problems` compiles the changed files (without importing or running them), so ``asya dev`` says at the
reload that a file will not import, instead of at the next call of an actor that uses it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["CodeChange", "CodeWatcher", "ReloadingHandler", "syntax_problems"]

Handler = Callable[[dict[str, Any], Any], Any]
#: The mesh's own packages stay loaded even when a code directory holds them (``code: .`` in this repository):
#: reloading the runtime under running pollers would mix two versions of its classes.
_NEVER_RELOADED: Final = frozenset({"asya", "asya_crew", "asya_gateway", "asya_cdk", "asya_local"})
#: Directories never watched: virtual environments, installed packages, caches, build output, hidden directories.
_SKIPPED_DIRS: Final = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "cdk.out", "build", "dist"})


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_DIRS


@dataclass(frozen=True, slots=True)
class CodeChange:
    """One detected change: the files that changed (added, modified or removed) and the modules forgotten."""

    files: tuple[Path, ...]
    modules: tuple[str, ...]


class CodeWatcher:
    """Polls ``*.py`` files under ``directories``; the first :meth:`poll` only takes the baseline."""

    def __init__(self, directories: Iterable[Path]) -> None:
        self._lock = threading.Lock()
        self._directories: tuple[Path, ...] = ()
        self._stamps: dict[Path, tuple[int, int]] = {}
        self.generation = 0
        self.watch(directories)

    def watch(self, directories: Iterable[Path]) -> None:
        """Watch these directories from now on (a manifest change may add or drop some); takes a new baseline."""
        with self._lock:
            self._directories = tuple(sorted({directory.resolve() for directory in directories}))
            self._stamps = self._scan()

    @property
    def directories(self) -> tuple[Path, ...]:
        return self._directories

    def poll(self) -> CodeChange | None:
        """The change since the last poll, if any; on a change the watched modules are forgotten."""
        with self._lock:
            stamps = self._scan()
            changed = tuple(
                sorted(
                    path for path in stamps.keys() | self._stamps.keys() if stamps.get(path) != self._stamps.get(path)
                )
            )
            self._stamps = stamps
            if not changed:
                return None
            modules = self._forget_modules()
            self.generation += 1
            return CodeChange(files=changed, modules=modules)

    def _scan(self) -> dict[Path, tuple[int, int]]:
        stamps: dict[Path, tuple[int, int]] = {}
        for directory in self._directories:
            for root, subdirs, files in os.walk(directory):
                subdirs[:] = [name for name in subdirs if not _skipped(name)]
                for name in files:
                    if not name.endswith(".py"):
                        continue
                    path = Path(root) / name
                    try:
                        stat = path.stat()
                    except OSError:
                        continue  # removed while scanning: the next poll sees it gone
                    stamps[path] = (stat.st_mtime_ns, stat.st_size)
        return stamps

    def _forget_modules(self) -> tuple[str, ...]:
        forgotten = []
        for name, module in list(sys.modules.items()):
            location = getattr(module, "__file__", None)
            if not location or name.partition(".")[0] in _NEVER_RELOADED:
                continue
            path = Path(location).resolve()
            for directory in self._directories:
                if path.is_relative_to(directory) and not any(
                    _skipped(part) for part in path.relative_to(directory).parts[:-1]
                ):
                    del sys.modules[name]
                    forgotten.append(name)
                    break
        return tuple(sorted(forgotten))


def syntax_problems(files: Iterable[Path], *, root: Path | None = None) -> list[str]:
    """``"<file>:<line>:<column>: SyntaxError: <message>"`` for each existing file that does not compile (paths shown
    relative to ``root`` when under it); compiling runs none of the file's code."""
    problems: list[str] = []
    for path in files:
        try:
            source = path.read_bytes()
        except OSError:
            continue  # removed: the next import of it fails with its own message
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:  # IndentationError and TabError are SyntaxErrors
            shown = path.relative_to(root) if root is not None and path.is_relative_to(root) else path
            where = f"{shown}:{exc.lineno or 0}:{exc.offset or 0}"
            problems.append(f"{where}: {type(exc).__name__}: {exc.msg}")
        except ValueError as exc:  # a NUL byte in the source
            problems.append(f"{path}: cannot compile: {exc}")
    return problems


class ReloadingHandler:
    """Calls the handler of a runtime built by ``factory``, rebuilt when ``watcher``'s generation moved."""

    def __init__(self, factory: Callable[[], Handler], watcher: CodeWatcher) -> None:
        self._factory = factory
        self._watcher = watcher
        self._generation = watcher.generation
        self._handler = factory()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        generation = self._watcher.generation
        if generation != self._generation:
            self._handler = self._factory()
            self._generation = generation
        return self._handler(event, context)
