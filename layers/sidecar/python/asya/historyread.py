"""Reading the run history (P-HIST-5, P-HIST-6): a task's steps from the chain of S3 objects, and
choosing the step a retry starts from. Shared by the gateway (``GET /api/v1/mesh/{id}/history``, ``POST
/api/v1/mesh/{id}/retry``) and the CLI; the writer is ``asya.history``.

:func:`read_history` never lists the bucket. It starts from the chain heads the hop claims left on the task's items
(``history_key`` and ``history_prev`` of the task item and of each child's fence item, one strongly consistent read of
the task's partition, ``asya.store.TaskStore.history_heads``) and walks backwards: each object's lines of the task's
tree (the task's envelope, and any envelope whose ``parent_id`` is in the tree, at any depth) are kept, and their
``prev`` keys are read next. Lines of other tasks in a shared invocation object are skipped, and their ``prev`` keys
never followed. A missing object (a Lambda that died before its PUT, or an invocation still running) is skipped and
counted. At most ``max_objects`` objects are read per request (default 500); ``truncated`` says the walk stopped
there.

The answer: ``{"id", "steps": [...], "truncated", "missing_objects"}``, steps sorted by ``started_at`` then ``hop``.
Each step has the fields ``actor``, ``attempt``, ``envelope_id``,
``parent_id``, ``message_id``, ``started_at``, ``duration_ms``, ``input``, ``outputs`` [``{"actor", "envelope_id",
"payload"}``], ``error``) plus ``hop``, ``input_bytes``, ``input_ref``, ``route``, ``headers``, ``key``.

STEP (``asya retry ID --from STEP``, P-HIST-6): ``N``, a hop index (the step of the task's own envelope whose route
had ``N`` actors behind it; the first attempt when it ran more than once); ``ACTOR`` / ``ACTOR#n``, the ``n``-th run
(1-based) of the actor in the task's tree, its own envelope's hops and its children's (fan-out slices) counted
together in hop order, a fan-out's slices in slice order; or a child's id, that child's first step. A bare ``ACTOR``
that ran more than once is ambiguous and refused with the choices. What a retry from a slice's step runs is
``asya.historyslices`` (P-HIST-9).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from asya import headers as hdr
from asya.exceptions import AsyaError
from asya.history import was_cut

__all__ = ["StepError", "StepRef", "parse_step", "read_history", "select_step"]

_STEP_RE: Final = re.compile(
    r"^(?:(?P<hop>\d+)|(?P<envelope>[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})"
    r"|(?P<actor>[A-Za-z][A-Za-z0-9_.-]*)(?:#(?P<nth>\d+))?)$"
)
_SERVED: Final = (
    "actor",
    "attempt",
    "envelope_id",
    "parent_id",
    "message_id",
    "started_at",
    "duration_ms",
    "input",
    "error",
    "hop",
    "input_bytes",
    "input_ref",
    "route",
    "headers",
)


class StepError(AsyaError, ValueError):
    """A STEP that does not parse, or names no step of the recorded history."""


@dataclass(frozen=True, slots=True)
class StepRef:
    """A parsed STEP: ``hop`` alone, ``envelope`` (a child's id) alone, or ``actor`` with ``nth`` (``None``: the
    only run)."""

    hop: int | None = None
    actor: str | None = None
    nth: int | None = None
    envelope: str | None = None

    def __str__(self) -> str:
        if self.hop is not None:
            return str(self.hop)
        if self.envelope is not None:
            return self.envelope
        return f"{self.actor}#{self.nth}" if self.nth is not None else str(self.actor)


def parse_step(text: str) -> StepRef:
    """``N`` or ``ACTOR[#n]`` (see the module docstring); :class:`StepError` names the bad value and the forms."""
    match = _STEP_RE.match(text.strip())
    if match is None:
        raise StepError(
            f"--from: {text!r} is not a step: give a hop index (e.g. 2) or an actor name, with #n for its n-th run "
            "(e.g. review#2), or a child's id"
        )
    if match["hop"] is not None:
        return StepRef(hop=int(match["hop"]))
    if match["envelope"] is not None:
        return StepRef(envelope=match["envelope"].lower())
    nth = match["nth"]
    if nth is not None and int(nth) < 1:
        raise StepError(f"--from: {text!r}: runs are counted from 1 (e.g. {match['actor']}#1)")
    return StepRef(actor=match["actor"], nth=int(nth) if nth is not None else None)


def select_step(history: dict[str, Any], ref: StepRef) -> dict[str, Any]:
    """The step of ``history`` (:func:`read_history`'s answer) that ``ref`` names; :class:`StepError` otherwise."""
    task_id = history.get("id")
    steps = [step for step in history.get("steps") or [] if isinstance(step, dict)]
    if ref.envelope is not None:
        return _child_step(steps, ref, str(task_id))
    own = [step for step in steps if step.get("envelope_id") == task_id]
    if not steps:
        raise StepError(f"task {task_id} has no recorded step: is its flow's history on (history: steps)?")
    first: dict[int, dict[str, Any]] = {}
    for step in own:  # the first attempt of each hop: every attempt of a hop got the same input
        first.setdefault(int(step.get("hop") or 0), step)
    hops = sorted(first)
    if ref.hop is not None:
        if ref.hop not in first:
            raise StepError(f"--from {ref}: task {task_id} has no recorded hop {ref.hop} (hops: {_listing(hops)})")
        return first[ref.hop]
    runs = [step for step in _runs(steps) if step.get("actor") == ref.actor]
    if not runs:
        actors = sorted({str(step.get("actor")) for step in steps})
        raise StepError(
            f"--from {ref}: actor {ref.actor!r} ran no step of task {task_id} (actors: {', '.join(actors)})"
        )
    if ref.nth is None:
        if len(runs) > 1:
            choices = ", ".join(f"{ref.actor}#{n}" for n in range(1, len(runs) + 1))
            raise StepError(
                f"--from {ref}: {ref.actor!r} ran {len(runs)} times in task {task_id}: say which ({choices})"
            )
        return runs[0]
    if ref.nth > len(runs):
        raise StepError(f"--from {ref}: {ref.actor!r} ran {len(runs)} time(s) in task {task_id}, not {ref.nth}")
    return runs[ref.nth - 1]


def _runs(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first attempt of every hop of every envelope of the tree, in hop order; at one hop the task's own envelope
    first, then a fan-out's slices in slice order (their ``x-asya-fan-in`` index), then by start."""
    first: dict[tuple[str, int], dict[str, Any]] = {}
    for step in steps:  # sorted by start: the first seen of an (envelope, hop) is its first attempt
        first.setdefault((str(step.get("envelope_id")), int(step.get("hop") or 0)), step)
    return sorted(
        first.values(), key=lambda s: (int(s.get("hop") or 0), _slice_index(s), str(s.get("started_at") or ""))
    )


def _slice_index(step: dict[str, Any]) -> int:
    fan_in = (step.get("headers") or {}).get(hdr.FAN_IN)
    index = fan_in.get("slice_index") if isinstance(fan_in, dict) else None
    return index if isinstance(index, int) else 0


def _child_step(steps: list[dict[str, Any]], ref: StepRef, task_id: str) -> dict[str, Any]:
    if ref.envelope == task_id:
        raise StepError(f"--from {ref}: that is the task's own id: give a hop index or ACTOR[#n] for its own steps")
    runs = [step for step in _runs(steps) if step.get("envelope_id") == ref.envelope]
    if not runs:
        children = sorted({str(s.get("envelope_id")) for s in steps if s.get("envelope_id") != task_id})
        shown = ", ".join(children[:5]) + (f" and {len(children) - 5} more" if len(children) > 5 else "")
        raise StepError(
            f"--from {ref}: task {task_id} has no recorded step of a child {ref} (children: {shown or 'none'})"
        )
    return runs[0]


def read_history(
    task_id: str,
    *,
    heads: Iterable[str],
    load: Callable[[str], str | None],
    max_objects: int = 500,
) -> dict[str, Any]:
    """Walk the chain from ``heads`` (see the module docstring); ``load(key)`` is an object's text or ``None``."""
    queue: deque[str] = deque(heads)
    seen: set[str] = set()
    tree: set[str] = {task_id}
    pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # lines whose parent is not (yet) known to be ours
    steps: dict[tuple[Any, ...], dict[str, Any]] = {}
    missing = 0

    def keep(key: str, line: dict[str, Any]) -> None:
        envelope_id = str(line.get("envelope_id"))
        identity = (line.get("message_id"), envelope_id, line.get("attempt"), line.get("started_at"))
        if identity in steps:
            return
        steps[identity] = _served(line, key)
        prev = line.get("prev")
        if isinstance(prev, str) and prev not in seen:
            queue.append(prev)
        if envelope_id not in tree:
            tree.add(envelope_id)
            for adopted in pending.pop(envelope_id, []):
                keep(*adopted)

    while queue and len(seen) < max_objects:
        key = queue.popleft()
        if key in seen:
            continue
        seen.add(key)
        text = load(key)
        if text is None:
            missing += 1
            continue
        for raw in text.splitlines():
            line = _parse(raw)
            if line is None:
                continue
            envelope_id, parent_id = str(line.get("envelope_id")), line.get("parent_id")
            if envelope_id in tree or (isinstance(parent_id, str) and parent_id in tree):
                keep(key, line)
            elif isinstance(parent_id, str):
                pending.setdefault(parent_id, []).append((key, line))
    ordered = sorted(steps.values(), key=lambda s: (str(s.get("started_at") or ""), int(s.get("hop") or 0)))
    return {"id": task_id, "steps": ordered, "truncated": bool(queue), "missing_objects": missing}


def _parse(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("envelope_id"), str) else None


def _served(line: dict[str, Any], key: str) -> dict[str, Any]:
    step = {name: line.get(name) for name in _SERVED}
    outputs = line.get("outputs")
    step["input_cut"] = was_cut(line, "input", "input_bytes", "input_cut")
    step["outputs"] = (
        [{**o, "cut": was_cut(o, "payload", "bytes", "cut")} for o in outputs if isinstance(o, dict)]
        if isinstance(outputs, list)
        else []
    )
    step["key"] = key
    return step


def _listing(values: list[int]) -> str:
    return ", ".join(str(v) for v in values) or "none"
