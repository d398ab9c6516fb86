"""Fail fast: every problem that would stop a mesh, found before anything starts, and reported together.

:func:`mesh_problems` returns one line per problem, in manifest order:

- each route entry, ``on_exhausted`` target and sink hook naming crew this release cannot run
  (``asya.naming.undeployed_crew``; x-pause and the declared fan-in aggregators run);
- each user actor whose ``code`` directory does not exist;
- each user actor whose handler cannot be loaded from its code directory (``actors.<name>.handler: <why>``), or is
  not async although the actor sets ``record_concurrency`` above 1 (P-PROC-1).

Handlers are checked one of two ways. ``instantiate=True`` (``asya dev``, ``asya demo``) loads each exactly as the
Lambda runtime does (``asya.abi.load_handler``: import, attribute, signature, and the class instantiated for
``module.Class.method``), so an ``__init__`` that raises is caught too. ``instantiate=False`` (``asya synth``,
``deploy``) imports the module and checks the attribute and the signature without creating any instance: a class
that loads a model in ``__init__`` costs nothing at synth time. Either way the code directory is put first on
``sys.path`` of this process, as the runtime does, and the module's import runs its top-level code.

:func:`check_mesh` raises one :class:`~asya_local.exceptions.LocalModeError` listing them all.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from asya import naming
from asya.abi import check_instantiable, check_record_concurrency, handler_kind, import_handler_module, load_handler
from asya.exceptions import HandlerLoadError
from asya.manifest import Manifest
from asya.suggest import did_you_mean_attribute
from asya_local.exceptions import LocalModeError

__all__ = ["check_mesh", "mesh_problems"]


def mesh_problems(manifest: Manifest, *, instantiate: bool) -> list[str]:
    """Every problem of ``manifest`` that would stop its mesh, one line each (empty: none)."""
    problems: list[str] = []
    for field, name in manifest.crew_targets():
        problem = naming.undeployed_crew([(field, name)])
        if problem is not None:
            problems.append(problem)
    for name, spec in manifest.actors.items():
        directory = manifest.code_dir(name)
        if not directory.is_dir():
            problems.append(
                f"actors.{name}.code: directory {directory} does not exist "
                f"(relative to the manifest's directory {manifest.base_dir})"
            )
            continue
        try:
            if instantiate:
                kind = load_handler(spec.handler, code_dir=str(directory)).kind
            else:
                kind = handler_kind(_check_statically(spec.handler, directory))
            check_record_concurrency(spec.handler, kind, spec.record_concurrency)
        except HandlerLoadError as exc:
            problems.append(f"actors.{name}.handler: {exc}")
    return problems


def check_mesh(manifest: Manifest, *, source: str, instantiate: bool) -> None:
    """Raise one :class:`LocalModeError` naming every problem of :func:`mesh_problems`; ``source`` names the
    manifest file."""
    problems = mesh_problems(manifest, instantiate=instantiate)
    if problems:
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        raise LocalModeError(f"{source}: {count}, nothing started:\n  " + "\n  ".join(problems))


def _check_statically(spec: str, directory: Path) -> Callable[..., Any]:
    """``load_handler``'s checks without instantiating a class; raises ``HandlerLoadError`` with the same wording.
    The function (or the class's method) the handler calls, for its kind."""
    parts = spec.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise HandlerLoadError(
            f"handler {spec!r} is not 'module.function' or 'module.Class.method' (dotted Python identifiers)"
        )
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    module, rest = import_handler_module(parts, spec)
    if len(rest) == 2:
        klass = _attribute(module, rest[0], spec)
        if not isinstance(klass, type):
            raise HandlerLoadError(
                f"handler {spec!r}: {module.__name__}.{rest[0]} is a {type(klass).__name__}, not a class"
            )
        check_instantiable(klass, spec)
        raw = inspect.getattr_static(klass, rest[1], None)
        if raw is None:
            hint = did_you_mean_attribute(klass, rest[1])
            raise HandlerLoadError(f"handler {spec!r}: class {klass.__qualname__} has no attribute {rest[1]!r}{hint}")
        if isinstance(raw, staticmethod | classmethod):
            method: Callable[..., Any] = getattr(klass, rest[1])
            _check_signature(method, spec, args=1)
            return method
        if callable(raw):
            _check_signature(raw, spec, args=2)  # self and the payload
            function: Callable[..., Any] = raw
            return function
        raise HandlerLoadError(f"handler {spec!r} is not callable: it is a value of type {type(raw).__name__}")
    target = _attribute(module, rest[0], spec)
    if isinstance(target, type):
        raise HandlerLoadError(
            f"handler {spec!r} names the class {target.__qualname__}; name a method: module.Class.method"
        )
    if not callable(target):
        raise HandlerLoadError(f"handler {spec!r} is not callable: it is a value of type {type(target).__name__}")
    _check_signature(target, spec, args=1)
    called: Callable[..., Any] = target
    return called


def _attribute(module: ModuleType, name: str, spec: str) -> Any:
    try:
        return getattr(module, name)
    except AttributeError:
        hint = did_you_mean_attribute(module, name)
        raise HandlerLoadError(f"handler {spec!r}: {module.__name__} has no attribute {name!r}{hint}") from None


def _check_signature(target: Any, spec: str, *, args: int) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * args))
    except TypeError:
        shown = signature if args == 1 else f"{signature} (with self)"
        raise HandlerLoadError(
            f"handler {spec!r} must take exactly one positional argument (the payload); its signature is {shown}"
        ) from None
