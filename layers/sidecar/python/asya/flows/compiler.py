"""The flow compiler: a Python flow function, parsed with ``ast`` (never run), to a :class:`~asya.flows.ir.Program`.

:func:`compile_flow` compiles one flow of a source text; :func:`check_source` returns every problem of a file
without raising. The language and the compile errors are documented in ``docs/flows.md``; every error is a
:class:`~asya.flows.errors.Problem` with file, line, column, message and fix, and all of a file's errors are
reported at once (:class:`~asya.flows.errors.FlowCompileError`).

Actors: a called name ``x`` names actor ``x`` when it is one of ``actors``, else ``x`` with ``_`` replaced by ``-``;
with ``actors`` given, a name that is neither is an error; without it (``asya flow check`` outside a project) every
called name is taken as an actor.

Limits are compile errors too (P-FLOW-22): a source over :data:`MAX_SOURCE_BYTES`, an integer literal over the
bound of evaluation (``asya.flows.expr.MAX_INT_BITS``), a string literal over ``MAX_VALUE_BYTES``, a float literal
that is not finite, and a file nested deeper than the parser or this compiler can follow (a long ``elif`` chain, a
long sum): ``RecursionError`` and ``MemoryError`` become a problem at line 1. A deep parse can still crash the
interpreter outright, so tools compile in a child process (``asya.flows.isolated``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from typing import Any, Final

from asya.flows.compile_expr import dotted_name
from asya.flows.compile_stmt import StatementCompiler
from asya.flows.errors import FlowCompileError, Problem
from asya.flows.ir import Program

__all__ = ["MAX_SOURCE_BYTES", "check_source", "compile_flow", "flow_functions"]

#: P-FLOW-22: the largest flow file the compiler reads.
MAX_SOURCE_BYTES: Final = 1024 * 1024


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        dotted_name(d.func if isinstance(d, ast.Call) else d) in ("flow", "asya.flows.flow", "flows.flow")
        for d in fn.decorator_list
    )


def flow_functions(tree: ast.Module, flow: str | None) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The function(s) to compile: the one named after ``flow`` (``-`` as ``_``), else those decorated ``@flow``,
    else the module's only function."""
    functions = _functions(tree)
    if flow is not None:
        named = [f for f in functions if f.name == flow.replace("-", "_")]
        if named:
            return named[:1]
    decorated = [f for f in functions if _decorated(f)]
    if decorated:
        return decorated if flow is None else decorated[:1] if len(decorated) == 1 else []
    return functions if len(functions) == 1 else []


def _parse(source: str, filename: str) -> tuple[ast.Module | None, list[Problem]]:
    try:
        return ast.parse(source, filename=filename), []
    except SyntaxError as exc:
        return None, [
            Problem(filename, exc.lineno or 0, exc.offset or 0, f"syntax error: {exc.msg}", "fix the Python syntax")
        ]


def _compile_function(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, *, filename: str, flow: str, actors: Collection[str] | None
) -> tuple[Program | None, list[Problem]]:
    compiler = StatementCompiler(filename, flow, actors)
    compiler.function(fn)
    if compiler.problems:
        return None, compiler.problems
    code = tuple(compiler.code)
    initial: list[str] = []
    for ins in code:
        if ins["op"] != "call":
            break
        initial.append(ins["actor"])
    used: dict[str, None] = {}
    for ins in code:
        for name in [ins.get("actor"), *ins.get("calls", ())]:
            if name:
                used[name] = None
    program = Program(
        flow=flow,
        code=code,
        max_iterations=compiler.max_iterations,
        source=filename,
        initial_route=tuple(initial),
        actors=tuple(used),
    )
    return program, []


def _limit_problem(filename: str, exc: BaseException) -> Problem:
    return Problem(
        filename,
        1,
        1,
        f"the flow is nested too deeply for the compiler ({type(exc).__name__})",
        "split long elif chains into nested ifs or separate actors, and long expressions into several mutations",
    )


def _size_problem(source: str, filename: str) -> Problem | None:
    size = len(source.encode("utf-8", "surrogatepass"))
    if size <= MAX_SOURCE_BYTES:
        return None
    return Problem(
        filename, 1, 1, f"the file is {size} bytes, over the limit of {MAX_SOURCE_BYTES}", "split the flow file"
    )


def _guarded(fn: Callable[[], Any], filename: str) -> Any:
    """``fn()``, with the parser's and the compiler's depth limits (and memory) as one compile error."""
    try:
        return fn()
    except (RecursionError, MemoryError) as exc:
        raise FlowCompileError([_limit_problem(filename, exc)]) from None


def compile_flow(source: str, *, flow: str, filename: str = "<flow>", actors: Collection[str] | None = None) -> Program:
    """Compile flow ``flow`` of ``source``; raises :class:`FlowCompileError` with every problem of the file."""
    too_big = _size_problem(source, filename)
    if too_big is not None:
        raise FlowCompileError([too_big])
    program: Program = _guarded(lambda: _compile_flow(source, flow=flow, filename=filename, actors=actors), filename)
    return program


def _compile_flow(source: str, *, flow: str, filename: str, actors: Collection[str] | None) -> Program:
    tree, problems = _parse(source, filename)
    if tree is None:
        raise FlowCompileError(problems)
    functions = flow_functions(tree, flow)
    if not functions:
        raise FlowCompileError(
            [
                Problem(
                    filename,
                    1,
                    1,
                    f"no flow function for flow '{flow}'",
                    f"name the function {flow.replace('-', '_')} or decorate exactly one function with @flow",
                )
            ]
        )
    program, problems = _compile_function(functions[0], filename=filename, flow=flow, actors=actors)
    if program is None:
        raise FlowCompileError(problems)
    return program


def check_source(source: str, *, filename: str = "<flow>", actors: Collection[str] | None = None) -> list[Problem]:
    """Every problem of a flow file, sorted by position (``asya flow check``); ``[]`` when it compiles."""
    too_big = _size_problem(source, filename)
    if too_big is not None:
        return [too_big]
    try:
        problems: list[Problem] = _guarded(lambda: _check_source(source, filename=filename, actors=actors), filename)
    except FlowCompileError as exc:
        return list(exc.problems)
    return problems


def _check_source(source: str, *, filename: str, actors: Collection[str] | None) -> list[Problem]:
    tree, problems = _parse(source, filename)
    if tree is None:
        return problems
    functions = flow_functions(tree, None)
    if not functions:
        return [Problem(filename, 1, 1, "no flow function", "decorate the flow function with @flow")]
    out: list[Problem] = []
    for fn in functions:
        out += _compile_function(fn, filename=filename, flow=fn.name.replace("_", "-"), actors=actors)[1]
    return sorted(out, key=lambda p: (p.line, p.col))
