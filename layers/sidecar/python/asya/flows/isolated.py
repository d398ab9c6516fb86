"""The flow compiler in a child process (P-FLOW-22), for the tools that load manifests and check flow files.

A parse of a pathological file can take the whole interpreter down (a C stack overflow is not an exception), and with
it whatever else that process runs: ``asya dev``'s mesh and moto's state. So :func:`compile_isolated` and
:func:`check_isolated` run :func:`asya.flows.compiler.compile_flow` / ``check_source`` in a fresh Python process and
read back its answer as JSON: the program, or the problems. A child that dies (a signal, a non-zero exit without an
answer) or does not answer within :data:`CHILD_TIMEOUT_SECONDS` is one compile error at line 1 of the file; it is
never raised as anything but :class:`~asya.flows.errors.FlowCompileError`.

Answers are kept per process by (source, flow, file name, actors), so a manifest loaded many times (tests, ``asya
dev`` restarts) starts one child per distinct flow file. Actor Lambdas never compile: they run compiled programs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Final

from asya.flows.errors import FlowCompileError, Problem
from asya.flows.ir import Program

__all__ = ["CHILD_TIMEOUT_SECONDS", "check_isolated", "compile_isolated"]

#: How long a child may compile one file before the file is refused.
CHILD_TIMEOUT_SECONDS: Final = 60.0
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])
_CHILD_CODE: Final = (
    f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); from asya.flows.isolated import _child_main; _child_main()"
)
_answers: dict[tuple[Any, ...], dict[str, Any]] = {}


def compile_isolated(
    source: str,
    *,
    flow: str,
    filename: str = "<flow>",
    actors: Collection[str] | None = None,
    command: Sequence[str] | None = None,
) -> Program:
    """:func:`asya.flows.compiler.compile_flow` in a child process; raises :class:`FlowCompileError`.
    ``command``: the child's command line (default: this Python running the compiler)."""
    answer = _ask({"op": "compile", "source": source, "flow": flow, "filename": filename}, actors, command)
    if "program" in answer:
        return Program.from_json(answer["program"])
    raise FlowCompileError(_problems(answer))


def check_isolated(
    source: str,
    *,
    filename: str = "<flow>",
    actors: Collection[str] | None = None,
    command: Sequence[str] | None = None,
) -> list[Problem]:
    """:func:`asya.flows.compiler.check_source` in a child process: every problem of the file."""
    return _problems(_ask({"op": "check", "source": source, "filename": filename}, actors, command))


def _ask(request: dict[str, Any], actors: Collection[str] | None, command: Sequence[str] | None) -> dict[str, Any]:
    request["actors"] = None if actors is None else sorted(actors)
    key = (json.dumps(request, sort_keys=True), tuple(command or ()))
    known = _answers.get(key)
    if known is None:
        known = _answers[key] = _run_child(request, command)
    copied: dict[str, Any] = json.loads(json.dumps(known))
    return copied


def _run_child(request: dict[str, Any], command: Sequence[str] | None) -> dict[str, Any]:
    filename = str(request["filename"])
    try:
        done = subprocess.run(  # our own interpreter and code; the source goes on stdin
            list(command or [sys.executable, "-c", _CHILD_CODE]),
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _failure(filename, f"the flow compiler did not finish within {CHILD_TIMEOUT_SECONDS:g} s")
    except OSError as exc:
        return _failure(filename, f"the flow compiler could not start: {exc.strerror or exc}")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode == 0 and isinstance(answer, dict) and ("program" in answer or "problems" in answer):
        return answer
    how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
    return _failure(filename, f"the flow compiler died on this file ({how})")


def _failure(filename: str, message: str) -> dict[str, Any]:
    fix = "split long elif chains and deeply nested expressions"
    return {"problems": [[filename, 1, 1, message, fix]]}


def _problems(answer: dict[str, Any]) -> list[Problem]:
    return [Problem(str(f), int(line), int(col), str(msg), str(fix)) for f, line, col, msg, fix in answer["problems"]]


def _child_main() -> None:
    """The child: one request on stdin, one answer on stdout."""
    from asya.flows.compiler import check_source, compile_flow

    request = json.loads(sys.stdin.read())
    actors = request["actors"]
    filename = request["filename"]
    answer: dict[str, Any]
    if request["op"] == "check":
        problems = check_source(request["source"], filename=filename, actors=actors)
        answer = {"problems": [_row(p) for p in problems]}
    else:
        try:
            program = compile_flow(request["source"], flow=request["flow"], filename=filename, actors=actors)
            answer = {"program": program.to_json()}
        except FlowCompileError as exc:
            answer = {"problems": [_row(p) for p in exc.problems]}
    sys.stdout.write(json.dumps(answer))


def _row(problem: Problem) -> list[Any]:
    return [problem.file, problem.line, problem.col, problem.message, problem.fix]
