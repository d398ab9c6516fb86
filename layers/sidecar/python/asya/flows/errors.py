"""Errors of flows: compile time (:class:`FlowCompileError`, every :class:`Problem` of a file) and run time
(:class:`FlowError`, which fails the task with reason ``RuntimeError`` and type ``FlowError``, P-FLOW-13)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from asya.exceptions import AsyaError

__all__ = ["FlowCompileError", "FlowError", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One compile error: where, what, and how to fix it."""

    file: str
    line: int
    col: int
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: {self.message}"
        return f"{text}; fix: {self.fix}" if self.fix else text


class FlowCompileError(AsyaError):
    """A flow source that is not in the language; ``problems`` holds every error of the file, in source order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(sorted(problems, key=lambda p: (p.line, p.col)))
        super().__init__("\n".join(str(p) for p in self.problems))


class FlowError(AsyaError):
    """A continuation could not go on: an expression failed, a loop hit ``max_iterations``, an actor returned two
    payloads, or the flow state is unusable."""
