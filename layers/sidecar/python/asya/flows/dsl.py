"""Stand-ins that let a flow file import and run as plain Python (docs/flows.md): ``@flow`` returns the function
unchanged, ``timeout`` is a no-op context manager (sync and async), ``pause`` returns the state merged with the
``resume`` mapping a plain run passes (as x-resume merges, shallow, P-RESUME-4), or raises ``TimeoutError`` when a
plain run passes ``resume=TimeoutError`` (nobody resumed in time, P-WAIT-1); ``map`` calls the actor on every item
and gives the results in item order, awaited at most ``max_concurrency`` at a time in an async flow (P-MAP-1). The
compiler reads these names from the source; they are never called by the mesh. ``sleep`` returns at once (awaitable
or not)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["flow", "map", "pause", "sleep", "timeout", "wait_for"]

_F = TypeVar("_F", bound=Callable[..., Any])


def flow(fn: _F | None = None, *, max_iterations: int = 100, max_concurrency: int | None = None) -> Any:
    """Marks the flow function; ``max_iterations`` bounds its loops (P-FLOW-13), ``max_concurrency`` the slices of
    each of its fan-outs and maps in flight at once (P-MAP-1)."""
    del max_iterations, max_concurrency
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


class _Slept:
    """What ``sleep`` returns: awaitable (an async flow) or ignored (a sync one)."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


def sleep(seconds: float) -> Any:
    """Plain run of ``await sleep(seconds)`` (P-WAIT-3): returns at once. The plain run is the oracle of what a flow
    computes, not of when; the mesh delays the task without holding a Lambda."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"sleep takes a positive number of seconds, got {seconds!r}")
    return _Slept()


class _Paused(dict[str, Any]):
    """The merged state, usable directly (a sync flow) or awaited (an async one)."""

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        yield from ()
        return dict(self)


def pause(
    state: dict[str, Any],
    *,
    prompt: str = "",
    fields: list[Any] | None = None,
    timeout: float | None = None,
    resume: Mapping[str, Any] | type[TimeoutError] | TimeoutError | None = None,
) -> Any:
    """Plain run of a pause: the state with ``resume`` merged in (awaitable or used directly); ``resume=TimeoutError``
    (the class or an instance) raises it, as the mesh does when nobody resumes within ``timeout``. A prompt that is not
    a string raises ``TypeError``, as the mesh fails the task (``FlowError``) on a computed prompt that is not one."""
    if not isinstance(prompt, str):
        raise TypeError(f"pause's prompt must be a string, got {type(prompt).__name__}")
    del fields
    if isinstance(resume, TimeoutError):
        raise resume
    if isinstance(resume, type):
        raise resume(f"pause timed out after {timeout} s" if timeout is not None else "pause timed out")
    return _Paused({**state, **(resume or {})})


class _Mapped(list[Any]):
    """The results of a plain run's map: a list (a sync flow), or awaited (an async flow, whose actor calls are
    awaitables), at most ``limit`` of them at a time."""

    def __init__(self, results: Iterable[Any], limit: int | None) -> None:
        super().__init__(results)
        self._limit = limit

    def __await__(self) -> Generator[Any, None, list[Any]]:
        return self._gather().__await__()

    async def _gather(self) -> list[Any]:
        if not any(inspect.isawaitable(r) for r in self):
            return list(self)
        gate = asyncio.Semaphore(self._limit or max(len(self), 1))

        async def one(result: Any) -> Any:
            async with gate:
                return await result if inspect.isawaitable(result) else result

        return list(await asyncio.gather(*(one(r) for r in self)))


def map(act: Callable[[Any], Any | Awaitable[Any]], items: Iterable[Any], *, max_concurrency: int | None = None) -> Any:
    """Plain run of a map: ``act`` called on every item, the results in item order (a list, or awaited)."""
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be a positive integer, got {max_concurrency!r}")
    return _Mapped([act(item) for item in items], max_concurrency)


_NO_SIGNAL: Any = object()


def wait_for(
    state: dict[str, Any],
    *,
    event: str,
    timeout: float | None = None,
    path: str | None = None,
    signal: Any = _NO_SIGNAL,
) -> Any:
    """Plain run of ``wait_for`` (P-WAIT-4): the state with ``signal``, the event's data, merged at ``path`` (default
    ``/<event>``) as x-resume merges it; without ``signal`` (nobody signaled in time), or with ``signal=TimeoutError``,
    it raises ``TimeoutError``."""
    from asya.pausing import merge_input  # the mesh's own merge: the plain run and the mesh cannot drift apart

    if signal is _NO_SIGNAL or signal is TimeoutError:
        raise TimeoutError(f"no signal '{event}' within {timeout} s" if timeout is not None else f"no signal '{event}'")
    if isinstance(signal, TimeoutError):
        raise signal
    metadata: dict[str, Any] = {"prompt": "", "fields": [], "event": event}
    if path is not None:
        metadata["path"] = path
    return _Paused(merge_input({"payload": state, "pause": {"metadata": metadata}}, signal))
