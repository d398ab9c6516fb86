"""The handler ABI (docs/protocol.md section 3): loading the user handler and running it.

``load_handler(spec, code_dir="")`` resolves ``ASYA_HANDLER`` (P-ABI-1): ``module.function`` or
``module.Class.method``, the module being the longest dotted prefix that imports. Every failure of P-ABI-2 raises
:class:`HandlerLoadError` with a message naming the spec and the cause; the caller remembers it (the container must
not crash). A class is instantiated once, with no arguments (P-ABI-3).

``Handler.run(payload, state, on_frame=..., on_fly=...)`` makes one call (P-ABI-4 .. P-ABI-11):

- the handler gets ``payload`` as given (no copy: pass a value the caller does not need unchanged afterwards);
- a function's (or coroutine's) return value is one frame, ``None`` zero frames (P-ABI-6, P-ABI-7); only a handler
  declared as a generator (or async generator) function, possibly behind ``functools.wraps`` decorators, is driven:
  a generator object a plain function returns is its return value, one frame, and cannot be encoded (P-ABI-19);
- every frame payload is a copy (``to_jsonable``) that shares nothing with the handler's objects, except with
  ``copy_result=False``: a function's (or coroutine's) return value that is already plain JSON (typically the input
  payload, changed in place) is then passed as it is (``as_jsonable``), for a caller that encodes it before any other
  code can change it (the sidecar: the call has ended and its frame is sent before the next call); a generator's frames
  are always copies, since the generator keeps running;
- a generator's (sync or async) yields are frames, ``None`` (ignored) or commands GET/SET/DEL/FLY (P-ABI-8,
  docs/protocol.md 3.3); ABI errors are thrown into the generator at its ``yield`` (P-ABI-14);
- frames reach ``on_frame`` as they are produced, as :class:`Frame` objects numbered from 0 carrying the state at
  yield time (P-ABI-9, P-ABI-10); FLY values reach ``on_fly`` converted by ``to_jsonable``;
- the kind is decided by what the call returns (a coroutine, a generator or an async generator), so decorated
  handlers behave like the function they wrap; async handlers run on one event loop per ``Handler``, created on first
  use and reused across calls (P-ABI-4): ``run`` runs the coroutine to its end on it, ``arun`` awaits it from a task
  already running there (the concurrent records of P-PROC-1);
- ``state`` is mutated in place: after ``run`` it holds the final ``route.next`` and headers (P-ROUTE-5).

Outcomes of ``run``: it returns ``None`` on success. An ``Exception`` raised by the handler (including ABI errors it
does not catch) is raised as :class:`HandlerError` wrapping it (``.exc``) (P-ABI-11, P-ERR-1). A yielded frame or FLY
value that cannot be converted (``to_jsonable``: NaN, an unknown type, or what UTF-8 JSON cannot carry) is not passed
on: its :class:`SerializationError` is thrown into the generator at that yield, like an ABI error; a return value that
cannot be converted is the handler's error, ``HandlerError(SerializationError)`` (P-ABI-19). An exception raised
by ``on_frame``/``on_fly`` propagates unchanged; the generator is closed first. A ``BaseException`` that is
not an ``Exception`` propagates unchanged (P-ABI-11). Frames passed to ``on_frame`` before any error stay passed.

With ``guard`` (an :class:`asya.timeout.CallGuard`) the call is bounded by its limit (P-TIME-7): the synchronous part
(the call itself and a sync generator's body) runs under ``guard.call``, coroutines and async generators under
``guard.bounded``, and ``on_frame``/``on_fly`` are shielded. Past the limit the generator is closed and ``run`` raises
:class:`asya.timeout.HandlerTimeoutError`; frames passed before stay passed.

With ``cancel`` (a zero-argument check, ``asya.cancelwatch``) a generator handler (sync or async) is asked about its
task's cancel after each ``yield`` (P-CANCEL-1..5): once the check answers true, nothing yielded at that ``yield`` is
passed on, :class:`asya.exceptions.TaskCanceledError` is thrown into the generator there (it may clean up), the
generator is closed (a further ``yield`` meets ``GeneratorExit``) and ``run`` raises ``TaskCanceledError``, whatever
the generator did after the throw (a cleanup error is logged). Functions and coroutines are never asked: they run to
their end.

``error_details(exc)`` builds the error details object of P-ERR-3.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import sys
import traceback
from collections.abc import AsyncGenerator as _AsyncGen
from collections.abc import Callable, Coroutine, Generator
from types import AsyncGeneratorType, CoroutineType, GeneratorType, ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal

from asya.abi_state import AbiState, Frame, command_verb
from asya.exceptions import HandlerLoadError, SerializationError, TaskCanceledError
from asya.serialize import as_jsonable, to_jsonable
from asya.suggest import did_you_mean_attribute
from asya.timeout import CallGuard

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "TRACEBACK_LIMIT_BYTES",
    "AbiState",
    "Frame",
    "Handler",
    "HandlerError",
    "HandlerKind",
    "check_instantiable",
    "check_record_concurrency",
    "error_details",
    "handler_kind",
    "import_handler_module",
    "load_handler",
    "to_jsonable",
]

_log = logging.getLogger(__name__)

_SPEC_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: P-ERR-3: the traceback keeps its last 32 KiB.
TRACEBACK_LIMIT_BYTES: Final = 32 * 1024

HandlerKind = Literal["function", "async", "generator", "async_generator"]
OnFrame = Callable[[Frame], None]
OnFly = Callable[[Any], None]
CancelCheck = Callable[[], bool]


class HandlerError(Exception):
    """The handler raised ``exc`` (a handler error, P-ERR-1), as opposed to an infrastructure error."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc


class Handler:
    """A loaded user handler: ``target`` takes the payload (P-ABI-5). Build with :func:`load_handler`."""

    __slots__ = ("_loop", "_target", "kind", "spec")

    def __init__(self, target: Callable[[Any], Any], *, spec: str = "") -> None:
        self._target = target
        self.spec = spec or getattr(target, "__qualname__", repr(target))
        self.kind: HandlerKind = _static_kind(target)
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Handler({self.spec!r}, kind={self.kind!r})"

    @property
    def is_async(self) -> bool:
        """Declared ``async def`` or as an async generator function: its records may run concurrently (P-PROC-1)."""
        return self.kind in ("async", "async_generator")

    def run(
        self,
        payload: Any,
        state: AbiState,
        *,
        on_frame: OnFrame,
        on_fly: OnFly,
        guard: CallGuard | None = None,
        copy_result: bool = True,
        cancel: CancelCheck | None = None,
    ) -> None:
        """One handler call; see the module docstring for frames, commands, errors, ``guard``, ``copy_result`` and
        ``cancel``. A coroutine runs to its end on this handler's own event loop."""
        pending, result, on_frame = self._begin(payload, state, on_frame, on_fly, guard=guard, cancel=cancel)
        if pending is not None:
            result = self._run_async(pending, guard)
        if result is not None:
            on_frame(state.frame(_result_payload(result, to_jsonable if copy_result else as_jsonable), 0))

    async def arun(
        self,
        payload: Any,
        state: AbiState,
        *,
        on_frame: OnFrame,
        on_fly: OnFly,
        guard: CallGuard | None = None,
        copy_result: bool = True,
        cancel: CancelCheck | None = None,
    ) -> None:
        """:meth:`run` from inside a task of the running loop (:meth:`event_loop`): a coroutine or async generator is
        awaited there, so other tasks run while it waits (the concurrent records of P-PROC-1)."""
        pending, result, on_frame = self._begin(payload, state, on_frame, on_fly, guard=guard, cancel=cancel)
        if pending is not None:
            result = await (pending if guard is None else guard.bounded(pending))
        if result is not None:
            on_frame(state.frame(_result_payload(result, to_jsonable if copy_result else as_jsonable), 0))

    def _begin(
        self,
        payload: Any,
        state: AbiState,
        on_frame: OnFrame,
        on_fly: OnFly,
        *,
        guard: CallGuard | None,
        cancel: CancelCheck | None,
    ) -> tuple[Coroutine[Any, Any, Any] | None, Any, OnFrame]:
        """The synchronous part of a call: ``(what is left to await, else None; the return value so far; on_frame)``,
        a sync generator already driven to its end."""
        if guard is not None:
            on_frame, on_fly = guard.shielded(on_frame), guard.shielded(on_fly)
            if cancel is not None:
                cancel = _shielded_check(guard, cancel)

        def sync_part() -> Any:
            try:
                result = self._target(payload)
            except Exception as exc:
                raise HandlerError(exc) from exc
            if isinstance(result, GeneratorType) and self.kind == "generator":
                _drive(result, state, on_frame, on_fly, cancel)
                return None
            return result

        result = sync_part() if guard is None else guard.call(sync_part)
        if isinstance(result, AsyncGeneratorType) and self.kind == "async_generator":
            return _drive_async(result, state, on_frame, on_fly, cancel), None, on_frame
        if isinstance(result, CoroutineType):
            return _await_handler(result), None, on_frame
        return None, result, on_frame

    def _run_async(self, coro: Coroutine[Any, Any, Any], guard: CallGuard | None) -> Any:
        # The loop thread is never interrupted asynchronously: async code is bounded by cancelling its task.
        return self.event_loop().run_until_complete(coro if guard is None else guard.bounded(coro))

    def close(self) -> None:
        """Close the event loop of async handlers (tests; a Lambda container never calls this)."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """This handler's event loop, created on first use and kept across calls (P-ABI-4)."""
        if self._loop is None:
            import asyncio  # only async handlers pay for the import (cold start)

            self._loop = asyncio.new_event_loop()
        return self._loop


def load_handler(spec: str, *, code_dir: str = "") -> Handler:
    """Load ``spec`` (P-ABI-1 .. P-ABI-3); ``code_dir``, when given, is put first on ``sys.path`` (once)."""
    if not isinstance(spec, str) or _SPEC_RE.fullmatch(spec) is None:
        raise HandlerLoadError(
            f"handler {spec!r} is not 'module.function' or 'module.Class.method' (dotted Python identifiers)"
        )
    if code_dir and code_dir not in sys.path:
        sys.path.insert(0, code_dir)
    parts = spec.split(".")
    module, rest = import_handler_module(parts, spec)
    target = _resolve(module, rest, spec)
    _check_one_positional(target, spec)
    return Handler(target, spec=spec)


def error_details(exc: BaseException) -> dict[str, Any]:
    """``{message, type, mro, traceback}`` of P-ERR-3; a :class:`HandlerError` is described by the error it wraps."""
    if isinstance(exc, HandlerError):
        exc = exc.exc
    try:
        message = str(exc)
    except Exception:
        message = f"<unprintable {type(exc).__name__}>"
    klass = type(exc)
    return {
        "message": message,
        "type": _qualified_name(klass),
        "mro": [_qualified_name(k) for k in klass.__mro__[1:] if k is not object and k is not BaseException],
        "traceback": _truncate_tail("".join(traceback.format_exception(exc)), TRACEBACK_LIMIT_BYTES),
    }


# --- running -------------------------------------------------------------------------------------------------------


def _frame_payload(value: Any, index: int, convert: Callable[[Any], Any] = to_jsonable) -> Any:
    try:
        return convert(value)
    except SerializationError as exc:
        raise SerializationError(f"frame {index} cannot be serialised: {exc}") from exc


def _result_payload(value: Any, convert: Callable[[Any], Any]) -> Any:
    """A return value that cannot be converted is the handler's own error (P-ABI-19)."""
    try:
        return _frame_payload(value, 0, convert)
    except SerializationError as exc:
        raise HandlerError(exc) from exc


def _command(item: tuple[Any, ...], state: AbiState, on_fly: OnFly) -> tuple[Any, Exception | None]:
    """``(value to send back, error to throw in)`` for one command: ABI errors (P-ABI-14) and a FLY value that cannot
    be converted (P-ABI-19) are thrown into the generator at its yield."""
    try:
        if command_verb(item) != "FLY":
            return state.apply(item), None
        converted = to_jsonable(item[1])
    except SerializationError as exc:
        return None, SerializationError(f"FLY value cannot be serialised: {exc}")
    except Exception as exc:
        return None, exc
    on_fly(converted)
    return None, None


async def _await_handler(coro: CoroutineType[Any, Any, Any]) -> Any:
    # Wrapping inside the loop keeps loop failures (e.g. a loop already running) apart from handler errors.
    try:
        return await coro
    except Exception as exc:
        raise HandlerError(exc) from exc


def _step(
    item: Any, index: int, state: AbiState, on_frame: OnFrame, on_fly: OnFly
) -> tuple[Any, Exception | None, int]:
    """One value a generator yielded: ``(reply, error to throw back, next frame index)``. ``None`` is skipped, a
    tuple is an ABI command, anything else is frame ``index``."""
    if item is None:
        return None, None, index
    if isinstance(item, tuple):
        reply, error = _command(item, state, on_fly)
        return reply, error, index
    try:
        payload = _frame_payload(item, index)
    except SerializationError as exc:  # nothing of this frame is passed on (P-ABI-19)
        return None, exc, index
    on_frame(state.frame(payload, index))
    return None, None, index + 1


def _shielded_check(guard: CallGuard, check: CancelCheck) -> CancelCheck:
    """``check`` made atomic with respect to the time limit's interruption, as ``on_frame`` is."""
    answer = [False]

    def store(_: None) -> None:
        answer[0] = check()

    run = guard.shielded(store)

    def shielded_check() -> bool:
        run(None)
        return answer[0]

    return shielded_check


_CANCELED_MESSAGE: Final = "the task was canceled"


def _thrown_cancel(gen: Generator[Any, Any, Any]) -> TaskCanceledError:
    """P-CANCEL-1..5: throw ``TaskCanceledError`` at the current yield; the caller closes the generator after."""
    error = TaskCanceledError(_CANCELED_MESSAGE)
    try:
        gen.throw(error)
    except (StopIteration, TaskCanceledError):
        pass
    except Exception:
        _log.warning("handler raised while cleaning up after its task was canceled", exc_info=True)
    return error


async def _athrown_cancel(agen: _AsyncGen[Any, Any]) -> TaskCanceledError:
    error = TaskCanceledError(_CANCELED_MESSAGE)
    try:
        await agen.athrow(error)
    except (StopAsyncIteration, TaskCanceledError):
        pass
    except Exception:
        _log.warning("handler raised while cleaning up after its task was canceled", exc_info=True)
    return error


def _drive(
    gen: Generator[Any, Any, Any], state: AbiState, on_frame: OnFrame, on_fly: OnFly, cancel: CancelCheck | None
) -> None:
    index = 0
    reply: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                item = gen.send(reply) if error is None else gen.throw(error)
            except StopIteration:
                return
            except Exception as exc:
                raise HandlerError(exc) from exc
            if cancel is not None and cancel():
                raise _thrown_cancel(gen)
            reply, error, index = _step(item, index, state, on_frame, on_fly)
    finally:
        try:
            gen.close()
        except Exception:
            _log.warning("handler generator failed while being closed after an error", exc_info=True)


async def _drive_async(
    agen: _AsyncGen[Any, Any], state: AbiState, on_frame: OnFrame, on_fly: OnFly, cancel: CancelCheck | None
) -> None:
    index = 0
    reply: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                item = await (agen.asend(reply) if error is None else agen.athrow(error))
            except StopAsyncIteration:
                return
            except Exception as exc:
                raise HandlerError(exc) from exc
            if cancel is not None and cancel():
                raise await _athrown_cancel(agen)
            reply, error, index = _step(item, index, state, on_frame, on_fly)
    finally:
        try:
            await agen.aclose()
        except Exception:
            _log.warning("handler async generator failed while being closed after an error", exc_info=True)


# --- loading -------------------------------------------------------------------------------------------------------


def import_handler_module(parts: list[str], spec: str) -> tuple[ModuleType, list[str]]:
    """The module (the longest importable prefix leaving one or two attributes) and the remaining names."""
    missing: list[str] = []
    for size in (len(parts) - 1, len(parts) - 2):
        if size < 1:
            break
        name = ".".join(parts[:size])
        try:
            return importlib.import_module(name), parts[size:]
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                missing.append(f"{name} ({exc})")
                continue
            raise HandlerLoadError(f"handler {spec!r}: importing module {name!r} failed: {exc}") from exc
        except Exception as exc:
            raise HandlerLoadError(
                f"handler {spec!r}: importing module {name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
    raise HandlerLoadError(f"handler {spec!r}: no module could be imported; tried {'; '.join(missing)}")


def _resolve(module: ModuleType, rest: list[str], spec: str) -> Callable[[Any], Any]:
    owner: object = module
    if len(rest) == 2:
        klass = _attribute(module, rest[0], spec)
        if not isinstance(klass, type):
            raise HandlerLoadError(
                f"handler {spec!r}: {module.__name__}.{rest[0]} is a {type(klass).__name__}, not a class"
            )
        owner = _instantiate(klass, spec)
    target = _attribute(owner, rest[-1], spec)
    if isinstance(target, type):
        raise HandlerLoadError(
            f"handler {spec!r} names the class {_qualified_name(target)}; name a method: module.Class.method"
        )
    if not callable(target):
        raise HandlerLoadError(f"handler {spec!r} is not callable: it is a value of type {type(target).__name__}")
    return target  # type: ignore[no-any-return]


def _attribute(owner: object, name: str, spec: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:
        where = owner.__name__ if isinstance(owner, ModuleType) else f"an instance of {type(owner).__qualname__}"
        hint = did_you_mean_attribute(owner, name)
        raise HandlerLoadError(f"handler {spec!r}: {where} has no attribute {name!r}{hint}") from None
    except Exception as exc:
        raise HandlerLoadError(f"handler {spec!r}: reading {name!r} failed: {type(exc).__name__}: {exc}") from exc


def check_instantiable(klass: type[Any], spec: str) -> None:
    """P-ABI-3: :class:`HandlerLoadError` naming the ``__init__`` parameters of ``klass`` that have no default (a
    class whose signature cannot be read passes: instantiating it tells)."""
    try:
        signature = inspect.signature(klass)
    except (TypeError, ValueError):
        return
    required = [
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if required:
        raise HandlerLoadError(
            f"handler {spec!r}: class {_qualified_name(klass)} cannot be instantiated without arguments: "
            f"__init__ parameters {', '.join(required)} have no default (P-ABI-3)"
        )


def _instantiate(klass: type[Any], spec: str) -> object:
    check_instantiable(klass, spec)
    try:
        return klass()
    except Exception as exc:
        raise HandlerLoadError(
            f"handler {spec!r}: instantiating {_qualified_name(klass)}() failed: {type(exc).__name__}: {exc}"
        ) from exc


def _check_one_positional(target: Callable[..., Any], spec: str) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # no introspectable signature (some C callables): the call itself will tell
    try:
        signature.bind(None)
    except TypeError:
        raise HandlerLoadError(
            f"handler {spec!r} must take exactly one positional argument (the payload); its signature is {signature}"
        ) from None


def check_record_concurrency(spec: str, kind: HandlerKind, record_concurrency: int) -> None:
    """Raise :class:`HandlerLoadError` when ``record_concurrency`` asks concurrent records of a handler that cannot
    await: only an ``async def`` or async generator lets other records run while it waits (P-PROC-1)."""
    if record_concurrency > 1 and kind not in ("async", "async_generator"):
        raise HandlerLoadError(
            f"record_concurrency {record_concurrency} needs an async handler (async def or async generator "
            f"function); {spec!r} is a {'sync function' if kind == 'function' else kind}: make it async or set "
            "record_concurrency to 1"
        )


def handler_kind(target: Callable[..., Any]) -> HandlerKind:
    """The kind ``target`` is declared as (:class:`Handler`'s ``kind``), without loading it as a handler."""
    return _static_kind(target)


def _static_kind(target: Callable[..., Any]) -> HandlerKind:
    """The kind as declared, seen through ``functools.wraps`` decorators: ``run`` drives a returned generator only for
    a generator kind (a plain function's return value is one frame, P-ABI-6)."""
    probes: list[Any] = [target, inspect.unwrap(target)]
    if not inspect.isroutine(target):
        probes.append(type(target).__call__)  # a callable instance: its class's __call__ tells the kind
    for probe in probes:
        if inspect.isasyncgenfunction(probe):
            return "async_generator"
        if inspect.iscoroutinefunction(probe):
            return "async"
        if inspect.isgeneratorfunction(probe):
            return "generator"
    return "function"


def _qualified_name(klass: type[Any]) -> str:
    """``module.QualName``, without a module for builtins (P-ERR-3)."""
    module = klass.__module__
    return klass.__qualname__ if module == "builtins" else f"{module}.{klass.__qualname__}"


def _truncate_tail(text: str, limit: int) -> str:
    if len(text) * 4 <= limit:  # UTF-8 needs at most 4 bytes per character
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[-limit:].decode("utf-8", errors="ignore")
