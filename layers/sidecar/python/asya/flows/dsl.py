"""Stand-ins that let a flow file import and run as plain Python (docs/flows.md): ``@flow`` returns the function
unchanged, ``timeout`` is a no-op context manager (sync and async), ``pause`` returns the state merged with the
``resume`` mapping a plain run passes (as x-resume merges, shallow, P-RESUME-4). The compiler reads these names from
the source; they are never called by the mesh."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["flow", "pause", "timeout"]

_F = TypeVar("_F", bound=Callable[..., Any])


def flow(fn: _F | None = None, *, max_iterations: int = 100) -> Any:
    """Marks the flow function; ``max_iterations`` bounds its loops (P-FLOW-13)."""
    del max_iterations
    if fn is not None:
        return fn
    return lambda inner: inner


class timeout:  # noqa: N801 - used as `with timeout(30):` in flow sources
    """``with timeout(seconds):`` / ``async with timeout(seconds):``: the deadline of the block (P-FLOW-12)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> timeout:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    async def __aenter__(self) -> timeout:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class _Paused(dict[str, Any]):
    """The merged state, usable directly (a sync flow) or awaited (an async one)."""

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        yield from ()
        return dict(self)


def pause(
    state: dict[str, Any], *, prompt: str = "", fields: list[Any] | None = None, resume: Mapping[str, Any] | None = None
) -> Any:
    """Plain run of a pause: the state with ``resume`` merged in (awaitable or used directly). A prompt that is not a
    string raises ``TypeError``, as the mesh fails the task (``FlowError``) on a computed prompt that is not one."""
    if not isinstance(prompt, str):
        raise TypeError(f"pause's prompt must be a string, got {type(prompt).__name__}")
    del fields
    return _Paused({**state, **(resume or {})})
