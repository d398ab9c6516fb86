"""A pure in-process simulator of the mesh's hop semantics for compiled flows (tests only; P-FLOW-2..13).

It runs the real continuation code (``asya.flows.mesh``) on real envelopes, with the mesh reduced to what a flow can
observe: one FIFO queue; per envelope id a hop fence (``h = len(route.prev) + 1``, a duplicate or lower hop is dropped,
P-ACK-8); user actors as plain Python functions of the payload (an exception is the final failure, no retries); a fan-in
aggregator per flow keyed by the slice header's ``set`` that merges in index order and emits once (P-AGG-4..6), starting
the later children of a bounded fan-out as earlier ones arrive (P-MAP-2); x-pause/x-resume with a shallow merge of a
given resume input (P-RESUME-4); x-sink keeping the first terminal envelope of the task (P-STAT-2), where a failed slice
outside a ``try`` fails its origin (P-SINK-3). A redeploy can happen between two envelopes (``redeploy``): from then on
the runtimes hold the new program by name and, when retained, the old one by digest, as after a deploy with the program
store (P-FLOWV-1..3).

:func:`plain_run` runs the same flow module as plain Python with the actors as ordinary functions.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from asya import naming, routing
from asya.abi import error_details
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import STATE_HEADER, Program, continue_outgoing, on_failure, start
from asya.flows.dsl import wait_for as dsl_wait_for
from asya.flows.interp import set_pointer
from asya.flows.mesh import on_pause_timeout, release
from asya.flows.versions import ProgramBook
from asya.pausing import merge_input

NOW = "2026-11-27T10:00:00Z"
#: The error type of a failure of the flow itself (an expression, a loop guard), in either run.
FLOW = "<flow>"


@dataclass
class Outcome:
    """What a task ended with: ``ok`` and the result payload, or the failure's error type; ``calls`` the actors that
    ran, in order; ``envelopes`` how many envelopes the mesh carried."""

    ok: bool
    result: Any = None
    error_type: str | None = None
    calls: list[str] = field(default_factory=list)
    hops: int = 0

    def key(self) -> tuple[Any, ...]:
        return (self.ok, self.result if self.ok else self.error_type)


def _roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value))


def simulate(
    program: Program,
    actors: Mapping[str, Callable[[Any], Any]],
    payload: Any,
    *,
    resume: Mapping[str, Any] | None = None,
    pause_timeout: bool = False,
    signals: Mapping[str, Any] | None = None,
    duplicate_every: bool = False,
    max_envelopes: int = 20_000,
    redeploy: tuple[int, Program] | None = None,
    retain: bool = True,
) -> Outcome:
    """Run ``program`` on ``payload`` through the simulated mesh. ``duplicate_every`` delivers every envelope twice
    (a redelivery): the fences must absorb the copies and the outcome must not change. ``pause_timeout``: every pause
    expires instead of being resumed (P-WAIT-2), as x-resume ends it. ``redeploy = (n, new)``
    deploys ``new`` before the ``n``-th envelope is delivered; ``retain``: the program store still holds
    ``program``."""
    task_id = "task-1"
    programs = ProgramBook({program.flow: program})
    created = Envelope(
        id=task_id,
        route=Route(prev=[], curr="", next=[]),
        payload=_roundtrip(payload),
        status=Status(created_at=NOW, updated_at=NOW),
    )
    queue: deque[tuple[routing.Outgoing, bool]] = deque((o, False) for o in start(program, created, now=NOW))
    fences: dict[str, int] = {}
    sets: dict[str, dict[int, Envelope]] = {}
    emitted: set[str] = set()
    final: Envelope | None = None
    calls: list[str] = []
    hops = 0
    while queue:
        hops += 1
        if redeploy is not None and hops == redeploy[0]:
            programs = ProgramBook({redeploy[1].flow: redeploy[1]})
            if retain:
                programs.add(program)
        if hops > max_envelopes:
            raise AssertionError("the simulated task did not end")
        out, is_copy = queue.popleft()
        env = copy.deepcopy(out.envelope)
        if duplicate_every and not is_copy and out.actor != naming.SINK:
            queue.append((out, True))  # a redelivery of the same envelope, later
        if out.actor == naming.SINK:
            status = env.status or Status()
            origin = env.id if env.parent_id is None else env.parent_id
            failed_slice = status.phase == Phase.FAILED.value and env.parent_id is not None
            if final is None and (env.id == task_id or (failed_slice and origin == task_id)):
                final = env
            continue
        if out.actor.startswith("x-fanin-flow-"):
            header = env.headers["x-asya-fan-in"]
            key = header["set"]
            if key in emitted:
                continue
            sets.setdefault(key, {})[header["slice_index"]] = env
            window = header.get("window")
            if window is not None:  # a bounded fan-out: the aggregator starts the children (P-MAP-2)
                index, count = header["slice_index"], header["slice_count"]
                starts = range(1, min(window, count - 1) + 1) if index == 0 else range(index + window, count)[:1]
                _push(queue, release(programs, sets[key][0], starts, count=count, set_id=key, window=window, now=NOW))
            if len(sets[key]) == header["slice_count"]:
                emitted.add(key)
                slices = [sets[key][i] for i in range(header["slice_count"])]
                slice0 = slices[0]
                merged_payload = set_pointer(
                    copy.deepcopy(slice0.payload), header["aggregation_key"], [s.payload for s in slices[1:]]
                )
                headers = {k: v for k, v in slice0.headers.items() if k != "x-asya-fan-in"}
                merged = Envelope(
                    id=header["origin_id"],
                    parent_id=slice0.parent_id,
                    route=Route(prev=[*slice0.route.prev, out.actor], curr="", next=[]),
                    payload=merged_payload,
                    headers=headers,
                    status=Status(
                        phase=Phase.SUCCEEDED.value,
                        reason=Reason.COMPLETED.value,
                        actor=out.actor,
                        created_at=NOW,
                        updated_at=NOW,
                    ),
                )
                _push(queue, continue_outgoing(programs, routing.Outgoing(naming.SINK, merged), now=NOW))
            continue
        hop = len(env.route.prev) + 1
        if fences.get(env.id, 0) >= hop:
            continue  # the hop claim absorbs a duplicate (P-ACK-8)
        fences[env.id] = hop
        if out.actor == naming.RESUME and "x-asya-wake" in env.headers:  # a sleep is over (P-WAIT-3)
            woken_headers = {k: v for k, v in env.headers.items() if k not in ("x-asya-wake", "x-asya-delay-until")}
            woken = Envelope(
                id=env.id,
                route=Route(prev=[*env.route.prev, naming.RESUME], curr="", next=[]),
                payload=env.payload,
                headers=woken_headers,
                status=Status(
                    phase=Phase.SUCCEEDED.value, reason=Reason.COMPLETED.value, actor=naming.RESUME, created_at=NOW
                ),
            )
            _push(queue, continue_outgoing(programs, routing.Outgoing(naming.SINK, woken), now=NOW))
            continue
        event = env.headers.get("x-asya-pause", {}).get("event") if out.actor == naming.PAUSE else None
        if out.actor == naming.PAUSE and (pause_timeout or (event is not None and event not in (signals or {}))):
            stored = dict(env.headers)
            seconds = int(stored.pop("x-asya-pause", {}).get("timeout") or 0)
            paused = Envelope(
                id=env.id,
                route=Route(prev=[*env.route.prev, naming.PAUSE], curr="", next=[]),
                payload=env.payload,
                headers=stored,
                status=Status(created_at=NOW),
            )
            _push(queue, on_pause_timeout(programs, paused, seconds=seconds, now=NOW, deadline_at=None))
            continue
        if out.actor == naming.PAUSE:
            stored = dict(env.headers)
            metadata = stored.pop("x-asya-pause", None) or {}
            if event is not None:  # a wait_for: the signal's data at its path, as x-resume merges it (P-WAIT-4)
                document = {"payload": env.payload, "pause": {"metadata": metadata}}
                payload_now = merge_input(document, (signals or {})[event])
            else:
                payload_now = {**env.payload, **(resume or {})}
            resumed = Envelope(
                id=env.id,
                route=Route(prev=[*env.route.prev, naming.PAUSE, naming.RESUME], curr="", next=[]),
                payload=payload_now,
                headers=stored,
                status=Status(
                    phase=Phase.SUCCEEDED.value, reason=Reason.COMPLETED.value, actor=naming.RESUME, created_at=NOW
                ),
            )
            _push(queue, continue_outgoing(programs, routing.Outgoing(naming.SINK, resumed), now=NOW))
            continue
        calls.append(env.route.curr)
        try:
            result = actors[env.route.curr](copy.deepcopy(env.payload))
        except Exception as exc:
            details = error_details(exc)
            details.pop("traceback", None)
            failure = routing.failure_envelope(
                env, details, actor=env.route.curr, now=NOW, original_payload=env.payload, trace=_NO_TRACE
            )
            caught = on_failure(programs, failure, original_payload=env.payload, now=NOW)
            _push(queue, caught if caught is not None else [failure])
            continue
        frame = _Frame(
            _roundtrip(result), list(env.route.next), dict(env.headers), env.status.deadline_at if env.status else None
        )
        outgoing = routing.forward_frame(env, frame, 0, actor=env.route.curr, now=NOW, trace=_NO_TRACE)
        _push(queue, continue_outgoing(programs, outgoing, now=NOW))
    assert final is not None, "the task never reached x-sink"
    status = final.status or Status()
    if status.phase == Phase.SUCCEEDED.value:
        assert STATE_HEADER not in final.headers
        return Outcome(ok=True, result=final.payload, calls=calls, hops=hops)
    error_type = str((status.error or {}).get("type"))
    return Outcome(
        ok=False, error_type=FLOW if error_type.endswith("FlowError") else error_type, calls=calls, hops=hops
    )


def _push(queue: deque[tuple[routing.Outgoing, bool]], outs: list[routing.Outgoing]) -> None:
    queue.extend((o, False) for o in outs)


class _Ready:
    def __init__(self, value: Any, error: BaseException | None) -> None:
        self.value, self.error = value, error

    def __await__(self) -> Generator[Any, None, Any]:
        yield from ()
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class _Frame:
    payload: Any
    next: list[str]
    headers: dict[str, Any]
    deadline_at: str | None


class _NoTrace:
    def headers(self, source: Mapping[str, Any]) -> dict[str, Any]:
        return dict(source)


_NO_TRACE: Any = _NoTrace()


def plain_run(
    namespace: Mapping[str, Any],
    flow_name: str,
    actors: Mapping[str, Callable[[Any], Any]],
    payload: Any,
    *,
    resume: Mapping[str, Any] | None = None,
    pause_timeout: bool = False,
    signals: Mapping[str, Any] | None = None,
) -> Outcome:
    """Run the flow function of a module namespace as plain Python, the actors as ordinary functions;
    ``pause_timeout``: every pause raises ``TimeoutError`` (the stand-in's ``resume=TimeoutError``)."""
    fn = namespace[flow_name]
    is_async = asyncio.iscoroutinefunction(fn)
    calls: list[str] = []
    glob = fn.__globals__
    raised: list[BaseException] = []

    def wrap(name: str, impl: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def sync(value: Any) -> Any:
            calls.append(name)
            try:
                return _roundtrip(impl(copy.deepcopy(value)))
            except Exception as exc:
                raised.append(exc)
                raise

        def run(value: Any) -> _Ready:
            # called eagerly, awaited later: the calls of a gather happen in argument order, all of them, as the
            # mesh sends every slice; an error is raised where the result is awaited
            try:
                return _Ready(sync(value), None)
            except Exception as exc:
                return _Ready(None, exc)

        return run if is_async else sync

    saved = {k: glob.get(k) for k in [*actors, "pause", "wait_for"]}
    for name, impl in actors.items():
        glob[name.replace("-", "_")] = wrap(name, impl)

    def pause(state: Any, **kwargs: Any) -> Any:
        if pause_timeout:
            error = TimeoutError(f"pause timed out after {kwargs.get('timeout')} s")
            raised.append(error)
            if is_async:
                return _Ready(None, error)
            raise error
        merged = {**state, **(resume or {})}
        return _Ready(merged, None) if is_async else merged

    def wait_for(state: Any, *, event: str, **kwargs: Any) -> Any:
        try:
            if pause_timeout or event not in (signals or {}):
                raise TimeoutError(f"no signal '{event}'")
            merged = dsl_wait_for(state, event=event, signal=(signals or {})[event], **kwargs)
        except TimeoutError as error:
            raised.append(error)
            if is_async:
                return _Ready(None, error)
            raise
        return _Ready(dict(merged), None) if is_async else dict(merged)

    glob["pause"] = pause
    glob["wait_for"] = wait_for
    try:
        state = _roundtrip(payload)
        result = asyncio.run(fn(state)) if is_async else fn(state)
        return Outcome(ok=True, result=_roundtrip(result), calls=calls)
    except Exception as exc:
        kind = error_details(exc)["type"] if any(exc is r for r in raised) else FLOW
        return Outcome(ok=False, error_type=kind, calls=calls)
    finally:
        for name, value in saved.items():
            if value is not None:
                glob[name] = value
