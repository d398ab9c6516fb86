"""Compile warnings for actors that can return more than one payload where a flow calls them (P-FLOW-11).

A call from a compiled flow must return one payload; a second frame fails the hop at run time. Where the handler's
source tells (read with ``ast``, never imported or run), :func:`two_frame_warnings` warns at each call of such an
actor in the flow, as a :class:`~asya.flows.errors.Problem` whose message starts with ``warning:``. It can tell
when the handler is a generator that yields a payload (anything but ``None``, which sends nothing, or a command tuple
such as ``("FLY", ...)``)

- inside a ``for`` or ``while`` loop,
- with ``yield from`` (the frames of another generator), or
- twice in one block (one after the other, both always reached when the first is).

Payload yields in different branches of an ``if``, a handler that cannot be found or parsed, or a handler that is
not a generator give no warning: the compiler cannot tell, and the run-time check stays (P-FLOW-11). Warnings never
fail a build.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from asya.flows.compiler import flow_functions
from asya.flows.errors import Problem

__all__ = ["HandlerSource", "two_frame_warnings"]

_FIX = "return one payload (merge the frames, or call it through a route of its own rather than from the flow)"


@dataclass(frozen=True)
class HandlerSource:
    """Where an actor's handler lives: ``module.function`` or ``module.Class.method`` under ``code_dir``."""

    handler: str
    code_dir: Path


def _module_file(code_dir: Path, module: str) -> Path | None:
    base = code_dir.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _function(tree: ast.Module, names: list[str]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = tree.body
    for index, name in enumerate(names):
        last = index == len(names) - 1
        found: ast.stmt | None = None
        for node in body:
            if getattr(node, "name", None) == name:
                found = node  # the last definition wins, as at import
        if last:
            return found if isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef) else None
        if not isinstance(found, ast.ClassDef):
            return None
        body = found.body
    return None


def _handler_function(source: HandlerSource) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parts = source.handler.split(".")
    # the longest module prefix that exists leaves one name (function) or two (class, method), as the loader does
    for size in (len(parts) - 1, len(parts) - 2):
        if size < 1:
            break
        path = _module_file(source.code_dir, ".".join(parts[:size]))
        if path is None:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            return None
        return _function(tree, parts[size:])
    return None


def _is_payload(node: ast.Yield) -> bool:
    """A yield that sends a frame: not ``yield None`` or a bare ``yield`` (ignored, P-ABI-8: the cancel point of a
    long loop), nor a command tuple ``(VERB, ...)`` with a string literal verb."""
    value = node.value
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return False
    return not (
        isinstance(value, ast.Tuple)
        and value.elts
        and isinstance(value.elts[0], ast.Constant)
        and isinstance(value.elts[0].value, str)
    )


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes of ``node``'s body, not descending into nested functions, classes or lambdas."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield child
        yield from _own_nodes(child)


def _payload_yields(node: ast.AST) -> int:
    return sum(1 for n in [node, *_own_nodes(node)] if isinstance(n, ast.Yield) and _is_payload(n))


def _why(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """Why ``fn`` can yield more than one payload, or ``None`` when the source does not tell."""
    for node in _own_nodes(fn):
        if isinstance(node, ast.YieldFrom):
            return f"yields from another generator (line {node.lineno})"
        if isinstance(node, ast.For | ast.AsyncFor | ast.While) and _payload_yields(node):
            return f"yields a payload inside a loop (line {node.lineno})"
    for node in [fn, *_own_nodes(fn)]:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            # statements of one block run one after the other: two that each yield a payload send two frames
            yielding = [s for s in block if isinstance(s, ast.stmt) and _payload_yields(s)]
            if len(yielding) >= 2:
                return f"yields a payload at lines {yielding[0].lineno} and {yielding[1].lineno}"
    return None


def _called_actors(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, actors: Mapping[str, HandlerSource]
) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            actor = name if name in actors else name.replace("_", "-")
            if actor in actors:
                yield actor, node


def two_frame_warnings(source: str, *, filename: str, actors: Mapping[str, HandlerSource]) -> list[Problem]:
    """A warning at each call, in the flow functions of ``source``, of an actor whose handler can tell it returns
    more than one payload; ``[]`` when the source does not parse (the compiler reports that)."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return []
    reasons: dict[str, str | None] = {}
    out: list[Problem] = []
    for fn in flow_functions(tree, None):
        for actor, call in _called_actors(fn, actors):
            if actor not in reasons:
                handler = _handler_function(actors[actor])
                reasons[actor] = _why(handler) if handler is not None else None
            reason = reasons[actor]
            if reason is not None:
                message = (
                    f"warning: actor '{actor}' can return more than one payload: its handler "
                    f"{actors[actor].handler} {reason}; a second frame fails the hop (P-FLOW-11)"
                )
                out.append(Problem(filename, call.lineno, call.col_offset + 1, message, _FIX))
    return sorted(out, key=lambda p: (p.line, p.col))
