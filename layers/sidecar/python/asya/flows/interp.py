"""The continuation interpreter (P-FLOW-2, P-FLOW-3): runs a :class:`~asya.flows.ir.Program` from a position on a
payload until the next suspension. Pure: no I/O; the clock enters only as ``now`` (for ``timeout`` blocks).

The flow's position and bookkeeping travel in :class:`FlowState` (header ``x-asya-flow-state``, P-FLOW-1).
:func:`advance` returns a :class:`Step`: the kind of suspension, the payload after the mutations, the state to put
in the header, and what the suspension needs (a route segment, fan-out slices, pause metadata, the deadline).
:func:`dispatch` finds the ``except`` clause for a failed call (P-FLOW-9).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final

from asya.flows.errors import FlowError
from asya.flows.expr import MAX_VALUE_BYTES, encoded_size, evaluate
from asya.flows.ir import Program
from asya.resiliency import RetryRule
from asya.serialize import copy_json
from asya.timeutil import format_ts, parse_ts

__all__ = [
    "MAX_ASSIGNED_BYTES",
    "MAX_PROMPT_BYTES",
    "STATE_HEADER",
    "TIME_BUDGET_SECONDS",
    "FlowState",
    "Step",
    "advance",
    "dispatch",
    "fanout_slices",
]

#: P-FLOW-1: the header that carries a compiled flow's position.
STATE_HEADER: Final = "x-asya-flow-state"
#: Instructions one continuation may execute; loops are bounded by max_iterations already, this bounds the rest.
_MAX_STEPS: Final = 100_000
#: P-FLOW-21: what one continuation may assign in all, its values measured as encoded.
MAX_ASSIGNED_BYTES: Final = 16 * 1024 * 1024
#: P-FLOW-21: the time one continuation may run, wherever it runs (the gateway at create, a layer, the crew).
TIME_BUDGET_SECONDS: Final = 5.0
#: P-FLOW-31: the longest prompt a pause may compute (UTF-8 bytes).
MAX_PROMPT_BYTES: Final = 8192
_NO_BASE: Final[Any] = object()
#: A program digest (P-FLOWV-1): the SHA-256 of its canonical JSON, lowercase hex.
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class FlowState:
    """``pc``: where to resume; ``owner``: the envelope id whose lineage the flow is (P-FLOW-11); ``loops``: iteration
    counts; ``tries``: ``[try pc, deadlines depth]`` innermost last; ``deadlines``: saved deadlines; ``base``: the
    state before a fan-out inside a try, carried by its slices (P-FLOW-10); ``digest``: the program the task runs
    (P-FLOWV-1), empty on a task started before programs were versioned."""

    flow: str
    pc: int = 0
    owner: str = ""
    loops: Mapping[str, int] = field(default_factory=dict)
    tries: tuple[tuple[int, int], ...] = ()
    deadlines: tuple[str | None, ...] = ()
    base: Any = _NO_BASE
    digest: str = ""

    def to_header(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flow": self.flow, "pc": self.pc, "owner": self.owner}
        if self.digest:
            out["digest"] = self.digest
        if self.loops:
            out["loops"] = dict(self.loops)
        if self.tries:
            out["try"] = [list(t) for t in self.tries]
        if self.deadlines:
            out["deadlines"] = list(self.deadlines)
        if self.base is not _NO_BASE:
            out["base"] = self.base
        return out

    def replayed(self, owner: str, deadline_at: str | None) -> FlowState:
        """The state a new task starts with when it replays this recorded one (P-HIST-8): the same position, loop
        counters, try stack and program, bound to the new task: ``owner`` is its id, and every saved outer deadline
        is its own ``deadline_at`` (the recorded ones are the old task's clock)."""
        return replace(self, owner=owner, deadlines=tuple(deadline_at for _ in self.deadlines))

    @property
    def has_base(self) -> bool:
        return self.base is not _NO_BASE

    @classmethod
    def from_header(cls, raw: object) -> FlowState:
        """Raises :class:`FlowError` on a malformed header."""
        try:
            if not isinstance(raw, Mapping):
                raise TypeError("not an object")
            loops = raw.get("loops", {})
            tries = raw.get("try", [])
            deadlines = raw.get("deadlines", [])
            digest = raw.get("digest", "")
            if not isinstance(digest, str) or (digest and not _DIGEST.fullmatch(digest)):
                raise ValueError(f"digest must be 64 lowercase hex digits, got {digest!r}")
            state = cls(
                flow=str(raw["flow"]),
                pc=int(raw["pc"]),
                owner=str(raw.get("owner", "")),
                loops={str(k): int(v) for k, v in loops.items()},
                tries=tuple((int(t[0]), int(t[1])) for t in tries),
                deadlines=tuple(d if isinstance(d, str) else None for d in deadlines),
                base=raw.get("base", _NO_BASE),
                digest=digest,
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise FlowError(f"{STATE_HEADER} is malformed: {exc}") from exc
        return state


@dataclass(frozen=True)
class Step:
    """Where a continuation stopped. ``kind``: ``route`` (``route`` = the calls to make), ``fanout`` (``slices`` =
    ``(actor, payload)`` per slice, ``target`` = the merge pointer, ``limit`` = the most slices in flight, P-MAP-2),
    ``pause`` (``pause`` = the x-asya-pause metadata), ``sleep`` (``sleep_seconds``) or ``end``."""

    kind: str
    payload: Any
    state: FlowState
    deadline_at: str | None
    route: tuple[str, ...] = ()
    slices: tuple[tuple[str, Any], ...] = ()
    target: str = ""
    limit: int | None = None
    pause: Mapping[str, Any] | None = None
    sleep_seconds: int = 0


def _set(state: Any, path: Sequence[Any], value: Any, line: int | None) -> Any:
    if not path:
        return value
    keys = [evaluate(k, state, line=line) for k in path]
    try:
        target = state
        for key in keys[:-1]:
            target = target[key]
        if isinstance(target, list) and not isinstance(keys[-1], int):
            raise TypeError("list indices must be integers")
        target[keys[-1]] = value
    except (KeyError, IndexError, TypeError) as exc:
        where = f" at line {line}" if line else ""
        raise FlowError(f"assignment{where} failed: {type(exc).__name__}: {exc}") from exc
    return state


def set_pointer(state: Any, pointer: str, value: Any) -> Any:
    """Set ``value`` at JSON Pointer ``pointer`` creating missing objects, as the aggregator merges (P-AGG-5)."""
    keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer.split("/")[1:]]
    if not isinstance(state, dict):
        raise FlowError(f"fan-out target {pointer}: the state is not an object")
    target = state
    for key in keys[:-1]:
        nxt = target.get(key)
        if not isinstance(nxt, dict):
            nxt = target[key] = {}
        target = nxt
    target[keys[-1]] = value
    return state


def fanout_slices(ins: Mapping[str, Any], payload: Any) -> tuple[tuple[str, Any], ...]:
    """``(actor, payload)`` of every slice of a ``fanout`` or ``map`` instruction run on the state ``payload``: a pure
    function of the two, so the aggregator that starts the later slices of a bounded map (P-MAP-2) builds the same
    slices the fan-out would have sent."""
    if ins["op"] == "fanout":
        return tuple((actor, copy_json(payload)) for actor in ins["calls"])
    line = ins.get("line")
    items = evaluate(ins["source"], payload, line=line)
    if not isinstance(items, list):
        raise FlowError(f"map at line {line} runs over a {type(items).__name__}, not a list")
    return tuple((ins["actor"], copy_json(item)) for item in items)


def advance(
    program: Program,
    payload: Any,
    state: FlowState,
    *,
    deadline_at: str | None,
    now: datetime,
    trace: list[int] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    budget_seconds: float = TIME_BUDGET_SECONDS,
) -> Step:
    """Run ``program`` from ``state.pc`` on ``payload`` to the next suspension; raises :class:`FlowError`.
    ``trace`` (the benchmark's) receives the position of every instruction executed. The run is bounded (P-FLOW-21):
    each assigned value by ``MAX_VALUE_BYTES``, their total by :data:`MAX_ASSIGNED_BYTES`, the time by
    ``budget_seconds`` of ``monotonic``."""
    code = program.code
    pc = state.pc
    loops = dict(state.loops)
    tries = list(state.tries)
    deadlines = list(state.deadlines)
    payload = copy_json(payload)
    assigned = 0
    give_up = monotonic() + budget_seconds
    for _ in range(_MAX_STEPS):
        if monotonic() > give_up:
            raise FlowError(f"flow '{program.flow}' ran past its time budget of {budget_seconds:g} s")
        if pc >= len(code):
            return _step("end", payload, state, pc, loops, tries, deadlines, deadline_at)
        ins = code[pc]
        op = ins["op"]
        line = ins.get("line")
        if trace is not None:
            trace.append(pc)
        if op == "call":
            route = []
            while pc < len(code) and code[pc]["op"] == "call":
                route.append(code[pc]["actor"])
                pc += 1
            return _step("route", payload, state, pc, loops, tries, deadlines, deadline_at, route=tuple(route))
        if op == "return":
            return _step("end", payload, state, len(code), loops, tries, deadlines, deadline_at)
        if op == "set":
            value = evaluate(ins["expr"], payload, line=line)
            size = encoded_size(value, MAX_VALUE_BYTES)
            if size > MAX_VALUE_BYTES:
                raise FlowError(f"assignment at line {line} stores a value of more than {MAX_VALUE_BYTES} bytes")
            assigned += size
            if assigned > MAX_ASSIGNED_BYTES:
                raise FlowError(
                    f"flow '{program.flow}' assigned more than {MAX_ASSIGNED_BYTES} bytes in one continuation"
                )
            payload = _set(payload, ins["path"], copy_json(value), line)
        elif op == "test":
            if not evaluate(ins["expr"], payload, line=line):
                pc = ins["else"]
                continue
        elif op == "jump":
            pc = ins["to"]
            continue
        elif op == "loopinit":
            loops[ins["id"]] = 0
        elif op == "loop":
            count = loops.get(ins["id"], 0) + 1
            if count > program.max_iterations:
                raise FlowError(f"loop at line {line} exceeded max_iterations={program.max_iterations}")
            loops[ins["id"]] = count
        elif op == "endloop":
            loops.pop(ins["id"], None)
        elif op == "try":
            tries.append((pc, len(deadlines)))
        elif op == "endtry":
            if tries:
                tries.pop()
        elif op == "deadline":
            deadlines.append(deadline_at)
            limit = format_ts(now + timedelta(seconds=float(ins["seconds"])))
            current = parse_ts(deadline_at)
            if current is None or parse_ts(limit) < current:  # type: ignore[operator]
                deadline_at = limit
        elif op == "enddeadline":
            if deadlines:
                deadline_at = deadlines.pop()
        elif op in ("fanout", "map"):
            slices = fanout_slices(ins, payload)
            if not slices:
                payload = set_pointer(payload, ins["target"], [])
            else:
                step = _step("fanout", payload, state, pc + 1, loops, tries, deadlines, deadline_at)
                return replace(step, slices=slices, target=ins["target"], limit=ins.get("limit"))
        elif op == "sleep":
            step = _step("sleep", payload, state, pc + 1, loops, tries, deadlines, deadline_at)
            return replace(step, sleep_seconds=int(ins["seconds"]))
        elif op == "pause":
            prompt = _prompt(ins, payload, line)
            step = _step("pause", payload, state, pc + 1, loops, tries, deadlines, deadline_at)
            pause: dict[str, Any] = {"prompt": prompt, "fields": list(ins["fields"])}
            timeout = program.pause_timeout(ins.get("timeout"))
            if timeout is not None:
                pause["timeout"] = timeout  # P-WAIT-1: x-pause arms the expiry
            for key in ("event", "path"):  # a wait_for (P-WAIT-4)
                if key in ins:
                    pause[key] = ins[key]
            return replace(step, pause=pause)
        else:
            raise FlowError(f"unknown instruction {op!r} at {pc}")
        pc += 1
    raise FlowError(f"flow '{program.flow}' ran {_MAX_STEPS} instructions without reaching an actor")


def _prompt(ins: Mapping[str, Any], payload: Any, line: int | None) -> str:
    """A pause's prompt: its literal, or its expression evaluated on the state at the pause (a string of at most
    :data:`MAX_PROMPT_BYTES`, since it travels in a header and is stored on the task item)."""
    if "prompt_expr" not in ins:
        return str(ins["prompt"])
    value = evaluate(ins["prompt_expr"], payload, line=line)
    if not isinstance(value, str):
        raise FlowError(f"pause at line {line}: the prompt is a {type(value).__name__}, not a string")
    if len(value.encode("utf-8")) > MAX_PROMPT_BYTES:
        raise FlowError(f"pause at line {line}: the prompt is over {MAX_PROMPT_BYTES} bytes")
    return value


def _step(  # noqa: PLR0917 - one call per suspension kind, all positional for brevity
    kind: str,
    payload: Any,
    state: FlowState,
    pc: int,
    loops: dict[str, int],
    tries: list[tuple[int, int]],
    deadlines: list[str | None],
    deadline_at: str | None,
    **members: Any,
) -> Step:
    new_state = FlowState(
        flow=state.flow,
        pc=pc,
        owner=state.owner,
        loops=loops,
        tries=tuple(tries),
        deadlines=tuple(deadlines),
        digest=state.digest,
    )
    return Step(kind=kind, payload=payload, state=new_state, deadline_at=deadline_at, **members)


def dispatch(
    program: Program, state: FlowState, error: Mapping[str, Any], *, deadline_at: str | None
) -> tuple[FlowState, str | None] | None:
    """P-FLOW-9: the state resuming at the ``except`` clause matching ``error`` (``{type, mro}``) and the deadline to
    restore, innermost ``try`` first; ``None`` when no clause matches."""
    candidates = [c for c in [error.get("type"), *(error.get("mro") or [])] if isinstance(c, str) and c]
    tries = list(state.tries)
    while tries:
        try_pc, depth = tries.pop()
        for clause in program.code[try_pc]["clauses"]:
            if RetryRule(errors=tuple(clause["errors"]), policy="").matches(candidates):
                deadlines = list(state.deadlines)
                restored = deadlines[depth] if len(deadlines) > depth else deadline_at
                resumed = FlowState(
                    flow=state.flow,
                    pc=int(clause["to"]),
                    owner=state.owner,
                    loops=dict(state.loops),
                    tries=tuple(tries),
                    deadlines=tuple(deadlines[:depth]),
                    digest=state.digest,
                )
                return resumed, restored
    return None
