"""Which program a continuation runs (P-FLOWV-1, P-FLOWV-2, P-FLOWV-5). Pure: no I/O.

A task runs the program it started with, named by the digest in its flow state, never another one:

- a state with a digest runs the program of that digest, held either as the deployment's own program of the flow
  (the common case: nothing was redeployed) or as a version the runtime read from the program store in its
  pre-flight (``asya.programstore``), recorded in a :class:`ProgramBook`;
- a digest no program of the book has is :class:`FlowVersionMissingError`: the task fails, the error naming the flow
  and the digest;
- a state without a digest (a task started before programs were versioned, or whose last continuation ran on a
  layer that does not know digests) runs the deployment's program of its flow name, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from asya.flows.errors import FlowError
from asya.flows.interp import FlowState
from asya.flows.ir import Program

__all__ = ["FlowVersionMissingError", "ProgramBook", "resolve"]


class FlowVersionMissingError(FlowError):
    """The program a task started with is not available to the runtime: not deployed here and not in the store."""

    def __init__(self, flow: str, digest: str) -> None:
        self.flow = flow
        self.digest = digest
        super().__init__(
            f"FlowVersionMissing: flow '{flow}' program {digest} is not kept (flows/{digest}.json); the task "
            "cannot go on with the program it started with"
        )


class ProgramBook(Mapping[str, Program]):
    """The deployment's programs by flow name (the mapping), plus every program version the runtime holds, by
    digest: the deployment's own and those read from the program store."""

    def __init__(self, current: Mapping[str, Program]) -> None:
        self._current = dict(current)
        self._versions = {program.digest: program for program in self._current.values()}

    def __getitem__(self, flow: str) -> Program:
        return self._current[flow]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current)

    def __len__(self) -> int:
        return len(self._current)

    def version(self, digest: str) -> Program | None:
        """The program of ``digest`` when the book holds it."""
        return self._versions.get(digest)

    def add(self, program: Program) -> None:
        """Hold ``program`` as a version (read from the store)."""
        self._versions[program.digest] = program


def resolve(programs: Mapping[str, Program], state: FlowState) -> Program:
    """The program ``state`` runs; raises :class:`FlowVersionMissingError` for a digest nothing holds and
    :class:`FlowError` for a digest-less state of a flow this deployment does not have."""
    current = programs.get(state.flow)
    if not state.digest:
        if current is None:
            raise FlowError(f"flow '{state.flow}' is not a compiled flow of this deployment")
        return current
    if current is not None and current.digest == state.digest:
        return current
    held = programs.version(state.digest) if isinstance(programs, ProgramBook) else None
    if held is None or held.flow != state.flow:
        raise FlowVersionMissingError(state.flow, state.digest)
    return held
