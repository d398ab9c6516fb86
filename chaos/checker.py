"""The chaos checker: the properties of P-ACK-7 over one run's recorded history and final store.

Each property is a list of violations (one line each, naming the task or queue); the run passes when every list is
empty.

- ``terminal_once``: every task ends terminal, and every terminal status observed for it (SSE, GET, final view) is
  the same one (P-STAT-2).
- ``monotonic``: within each ordered stream (one SSE follower, the GET poller) a task's status never goes back:
  ``pending`` < ``running`` < terminal.
- ``accounted``: no envelope is lost: after the run every actor queue is empty (each message acked, in a DLQ or
  consumed by x-sump), every dead letter belongs to a task of the run, and a ``fan`` task that timed out has an
  envelope in a DLQ to show for it, or was *late by redelivery*: an invocation holding its task envelope met a fault
  that returns the record after its visibility timeout (a crash, an injected failure) so late that the record came
  back less than ``_ROUTE_SECONDS`` before the task's deadline, or after it. Such a task was not lost: crashes in a row
  (each costs a visibility timeout) used up its deadline, and the layer sent the late envelope to x-sink as
  failed, reason ``Timeout`` (P-TIME-3).
- ``checkpoint``: a succeeded task's view names a checkpoint line (``checkpoint_key``, ``checkpoint_line``) whose
  payload equals the expected result; a task never has both a ``succeeded/`` and a ``failed/`` line, nor two
  succeeded lines with different payloads; a task's outcome is the expected one (``late`` fails; ``fan`` succeeds
  unless a dead letter or handler errors on every attempt of one hop explain its failure).
- ``duplicates``: a handler runs twice for one hop ``(actor, envelope, h, a)`` only when an earlier run of that hop
  was in an invocation that a crash or an injected failure kept from acking, or started at least a lease
  (``lease_seconds``) before, so its lease had ended (P-ACK-7); injected duplicate messages and visibility timeouts
  that expire mid-handler never reach the handler while the lease is live.
- ``followed``: every task followed over SSE had its terminal status delivered on that stream, across any number of
  resumes (``Last-Event-ID``) after gateway restarts (GW-SSE-5, GW-SSE-7).
- ``children``: no write to a task item comes from an invocation that holds no envelope of that task's id (a fan-out
  child's), P-FAN-3.
- ``after_end``: no handler runs for an envelope whose task had already ended when the copy arrived (P-ACK-7,
  P-STAT-10): a repeated run of a hop ``(actor, envelope, h, a)`` whose invocation received its record after the
  first terminal status a client observed for the task (so after the terminal write) is a violation. A child's first
  run of a hop after its task ended is no copy: children may finish after their task (P-FAN-6). The window
  RELIABILITY.md documents as open is counted apart (:func:`runs_across_end`): a record received before the terminal
  write, whose handler ran after it (a fan-out child's claim is on its own item and does not re-read the task).
- ``forged``: every forged crew-only status posted to the producer route was refused (GW-EVT-1/3), every
  ``SET`` of a crew actor into ``route.next`` was refused at its yield (P-ABI-15), and so was every ``SET`` or
  ``DEL`` of a header the layer owns (P-HDR-5).
- ``flows``: every task of the compiled flow ``calc`` made the actor calls of the flow's plain-Python run
  (``chaos.flowplain``), in order, one per hop (the handler runs of the task's own envelope by hop ``h``; a retried,
  redelivered or duplicated hop counts once), and a succeeded one ended with the plain run's result. A failed one
  made a prefix of those calls and is explained: an actor returned a second payload (P-FLOW-11; then no actor ran at
  a later hop, on either payload), or a dead letter, exhausted retries or a late redelivery explain it as for ``fan``.
  A second payload's hop fails as a handler error, so the mesh's retry policy may run it again and the task go on;
  whatever the outcome, no actor ever runs an envelope of the task other than its own (``calc`` never fans out).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from chaos.actors import HandlerCall
from chaos.faults import REDELIVERING, Invocation
from chaos.workload import TERMINAL, Observation, TaskPlan

__all__ = ["PROPERTIES", "DeadLetter", "History", "check", "duplicate_runs", "runs_across_end", "runs_after_lease"]

#: Property name -> the column title of the fault matrix (RELIABILITY.md).
PROPERTIES: Final = {
    "terminal_once": "terminal, exactly once",
    "monotonic": "statuses never went back",
    "accounted": "envelopes accounted for (acked, DLQ, x-sump)",
    "checkpoint": "checkpoint = expectation, none contradictory",
    "duplicates": "duplicate handler runs explained (P-ACK-7)",
    "followed": "SSE followers saw the terminal status",
    "children": "children wrote no task status",
    "after_end": "no handler run after its task ended (P-ACK-7)",
    "forged": "forged crew statuses, crew and layer-header SETs refused",
    "flows": "flow tasks = their plain-Python run (calls, result)",
}
_RANK: Final = {"pending": 0, "running": 1, "paused": 1}
_TIMED_OUT: Final = "task timed out"
#: ``max_attempts`` of the chaos mesh's retry policies (chaos/mesh/asya.yaml).
_MAX_ATTEMPTS: Final = 3
#: Seconds a redelivered task envelope may need to finish the rest of its route under load: a record that came back
#: closer than this to the deadline explains a timeout.
_ROUTE_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class DeadLetter:
    actor: str
    envelope: dict[str, Any] | None


@dataclass(frozen=True)
class History:
    """Everything one run recorded, and the final state read back from the store, the queues and the bucket."""

    tasks: Mapping[str, TaskPlan]
    observations: Sequence[Observation]
    views: Mapping[str, dict[str, Any] | None]
    calls: Sequence[HandlerCall]
    child_task_writes: Sequence[dict[str, Any]] = ()
    dead_letters: Sequence[DeadLetter] = ()
    #: Queue name -> messages still in it (visible, in flight or delayed) after the run settled.
    leftovers: Mapping[str, int] = field(default_factory=dict)
    #: Checkpoint object key -> its lines, parsed.
    checkpoints: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: The hop lease: the Lambda timeout + 10 s (P-ACK-8).
    lease_seconds: float = 25.0
    #: Every invocation of an actor, with the faults it met (handler calls are only those that reached a handler).
    invocations: Sequence[Invocation] = ()
    #: The user actors' queue visibility timeout: how long a crashed invocation's record stays away.
    visibility_seconds: float = 30.0
    #: Flow name -> its deadline in seconds from creation (the manifest's ``flows.*.timeout``).
    flow_timeouts: Mapping[str, float] = field(default_factory=dict)
    #: ``crew_set`` faults played: ``(envelope id, crew name, refused at the yield)``.
    crew_sets: Sequence[tuple[str, str, bool]] = ()
    #: ``layer_set`` faults played: ``(envelope id, header, refused at the yield)``.
    layer_sets: Sequence[tuple[str, str, bool]] = ()
    #: Forged producer posts the gateway accepted (2xx), one line each.
    forged_accepted: Sequence[str] = ()


def check(history: History) -> dict[str, list[str]]:
    """Violations per property (every property present, an empty list when it holds)."""
    return {
        "terminal_once": _terminal_once(history),
        "monotonic": _monotonic(history),
        "accounted": _accounted(history),
        "checkpoint": _checkpoints(history) + _outcomes(history),
        "duplicates": _duplicates(history.calls, history.lease_seconds),
        "followed": _followed(history),
        "children": [f"{w['actor']} wrote task {w['task']} ({w['operation']})" for w in history.child_task_writes],
        "after_end": _after_end(history),
        "forged": [f"forged post accepted: {post}" for post in history.forged_accepted]
        + [
            f"{crew} SET into the route of {env} was not refused"
            for env, crew, refused in history.crew_sets
            if not refused
        ]
        + [
            f"{header} SET by the handler of {env} was not refused"
            for env, header, refused in history.layer_sets
            if not refused
        ],
        "flows": _flows(history),
    }


def _flows(history: History) -> list[str]:
    from chaos.flowplain import plain_run  # loads the flow file only where a run has flow tasks

    out = []
    explained = _dead_tasks(history) | _exhausted_hops(history.calls)
    late = _late_by_redelivery(history)
    for task_id, plan in history.tasks.items():
        if plan.flow != "calc":
            continue
        view = history.views.get(task_id) or {}
        expected_calls, expected_result = plain_run(plan.payload)
        by_hop: dict[int, str] = {}
        last_attempt: dict[int, int] = {}
        seconds: list[HandlerCall] = []
        for call in sorted(history.calls, key=lambda c: c.hop):
            if call.envelope_id != task_id:
                if call.task_id == task_id:  # calc never fans out: another envelope of the task is a second payload
                    out.append(f"{task_id}: {call.actor} ran {call.envelope_id}, a second payload, at hop {call.hop}")
                continue
            by_hop.setdefault(call.hop, call.actor)
            last_attempt[call.hop] = max(last_attempt.get(call.hop, 0), call.attempt)
            if "second_payload" in call.invocation.faults:
                seconds.append(call)
        # a second payload ends the task only on the hop's last attempt: an earlier one was retried by the policy
        final = [c for c in seconds if c.attempt == last_attempt[c.hop]]
        second = (final[0].hop, final[0].actor) if final else None
        made = [by_hop[hop] for hop in sorted(by_hop)]
        status = view.get("status")
        if status == "succeeded":
            if made != expected_calls:
                out.append(f"{task_id}: called {made}, the plain run calls {expected_calls}")
            elif view.get("result") != expected_result:
                out.append(
                    f"{task_id}: succeeded with {view.get('result')!r}, the plain run returns {expected_result!r}"
                )
            continue
        if status != "failed":
            continue  # terminal_once reports a task left running
        if made != expected_calls[: len(made)]:
            out.append(f"{task_id}: called {made}, not a start of the plain run's {expected_calls}")
        if second is not None:
            hop, actor = second
            out += [
                f"{task_id}: {by_hop[later]} ran at hop {later}, after {actor} returned two payloads at hop {hop}"
                for later in sorted(by_hop)
                if later > hop
            ]
        elif task_id not in explained and not (view.get("error") == _TIMED_OUT and task_id in late):
            out.append(f"{task_id}: failed with nothing injected to explain it: {view.get('error')!r}")
    return out


def _ended_at(history: History) -> dict[str, float]:
    """Task id -> when a client first observed its terminal status (after the terminal write)."""
    ended: dict[str, float] = {}
    for observation in history.observations:
        if observation.status in TERMINAL and observation.task_id not in ended:
            ended[observation.task_id] = observation.at
    return ended


def _after_end(history: History) -> list[str]:
    ended = _ended_at(history)
    out = []
    for group in _by_hop(history.calls).values():
        for call in group[1:]:  # a copy: an earlier run of the same hop exists
            end = ended.get(call.task_id)
            if end is not None and call.invocation.received > end:
                out.append(
                    f"{call.actor} ran {call.envelope_id} (task {call.task_id}) hop ({call.hop}, {call.attempt}) "
                    f"again, received {call.invocation.received - end:.2f} s after the task ended"
                )
    return out


def runs_across_end(history: History) -> int:
    """Handler runs of records received before their task's observed end whose handler started after it: the window
    between a child's pre-flight read and its handler call that RELIABILITY.md documents as open."""
    ended = _ended_at(history)
    return sum(
        1
        for call in history.calls
        if (end := ended.get(call.task_id)) is not None and call.invocation.received <= end < call.started
    )


def duplicate_runs(calls: Sequence[HandlerCall]) -> int:
    """Handler runs beyond the first of their hop."""
    return sum(len(group) - 1 for group in _by_hop(calls).values())


def runs_after_lease(calls: Sequence[HandlerCall], lease_seconds: float) -> int:
    """Repeated runs that only an ended lease explains (no crash or failure before them): a duplicate copy that
    came back after the lease while the next hop had not claimed (P-ACK-7's third case)."""
    return sum(
        1
        for group in _by_hop(calls).values()
        for index in range(1, len(group))
        if not _failed_before(group[:index]) and _lease_ended(group[:index], group[index], lease_seconds)
    )


def _failed_before(earlier: Sequence[HandlerCall]) -> bool:
    return any(REDELIVERING & set(call.invocation.faults) for call in earlier)


def _lease_ended(earlier: Sequence[HandlerCall], call: HandlerCall, lease_seconds: float) -> bool:
    # the lease counts from the invocation's start, a moment before its handler call: one second of slack
    return all(call.started >= before.started + lease_seconds - 1.0 for before in earlier)


def _terminal_once(history: History) -> list[str]:
    out = []
    seen: dict[str, set[str]] = defaultdict(set)
    for observation in history.observations:
        if observation.status in TERMINAL:
            seen[observation.task_id].add(observation.status)
    for task_id in history.tasks:
        view = history.views.get(task_id)
        if view is None:
            out.append(f"{task_id}: no task view at the end")
            continue
        if view["status"] not in TERMINAL:
            out.append(f"{task_id}: ended {view['status']!r}, not terminal")
            continue
        statuses = seen[task_id] | {view["status"]}
        if len(statuses) > 1:
            out.append(f"{task_id}: several terminal statuses observed: {sorted(statuses)}")
    return out


def _monotonic(history: History) -> list[str]:
    out = []
    last: dict[tuple[str, str], str] = {}
    for observation in history.observations:
        key = (observation.stream, observation.task_id)
        before = last.get(key)
        last[key] = observation.status
        if before is None:
            continue
        went_back = _rank(observation.status) < _rank(before)
        changed_after_end = before in TERMINAL and observation.status != before
        if went_back or changed_after_end:
            out.append(f"{observation.task_id}: {observation.source} saw {before!r} then {observation.status!r}")
    return out


def _followed(history: History) -> list[str]:
    ended = {o.task_id for o in history.observations if o.source == "sse" and o.status in TERMINAL}
    return [
        f"{task_id}: its SSE follower never saw a terminal status"
        for task_id, plan in history.tasks.items()
        if plan.follow and task_id not in ended
    ]


def _rank(status: str) -> int:
    return 2 if status in TERMINAL else _RANK.get(status, 0)


def _task_of(envelope: Mapping[str, Any] | None) -> str | None:
    if envelope is None:
        return None
    parent = envelope.get("parent_id")
    task = parent if isinstance(parent, str) else envelope.get("id")
    return task if isinstance(task, str) else None


def _dead_tasks(history: History) -> set[str]:
    return {task for letter in history.dead_letters if (task := _task_of(letter.envelope)) is not None}


def _accounted(history: History) -> list[str]:
    out = [
        f"queue {queue}: {count} message(s) left after the run" for queue, count in history.leftovers.items() if count
    ]
    explained = _dead_tasks(history) | _late_by_redelivery(history)
    for letter in history.dead_letters:
        if _task_of(letter.envelope) not in history.tasks:
            out.append(f"DLQ of {letter.actor}: a message of no task of the run: {letter.envelope!r:.200}")
    for task_id, plan in history.tasks.items():
        view = history.views.get(task_id) or {}
        if plan.flow == "fan" and view.get("error") == _TIMED_OUT and task_id not in explained:
            out.append(f"{task_id}: timed out with no envelope in a DLQ and no redelivery near its deadline (lost)")
    return out


def _late_by_redelivery(history: History) -> set[str]:
    """Tasks whose own envelope was sent back to its queue by a fault so late that it came back less than
    ``_ROUTE_SECONDS`` before the task's deadline (or after it)."""
    created = {o.task_id: o.at for o in history.observations if o.source == "create"}
    out = set()
    for invocation in history.invocations:
        if not REDELIVERING & set(invocation.faults):
            continue
        back = invocation.received + history.visibility_seconds
        for task_id in invocation.batch_ids & created.keys():
            timeout = history.flow_timeouts.get(history.tasks[task_id].flow)
            if timeout is not None and back >= created[task_id] + timeout - _ROUTE_SECONDS:
                out.add(task_id)
    return out


def _checkpoints(history: History) -> list[str]:
    out = []
    phases: dict[str, set[str]] = defaultdict(set)
    payloads: dict[str, set[str]] = defaultdict(set)
    for key, lines in history.checkpoints.items():
        phase = key.partition("/")[0]
        for line in lines:
            if line.get("parent_id") is None and isinstance(task := line.get("id"), str):
                phases[task].add(phase)
                if phase == "succeeded":
                    payloads[task].add(repr(line.get("payload")))
    for task_id in history.tasks:
        if {"succeeded", "failed"} <= phases[task_id]:
            out.append(f"{task_id}: contradictory checkpoints, both succeeded/ and failed/")
        if len(payloads[task_id]) > 1:
            out.append(f"{task_id}: succeeded checkpoints with different payloads: {sorted(payloads[task_id])}")
    for task_id, plan in history.tasks.items():
        view = history.views.get(task_id) or {}
        if view.get("status") != "succeeded" or plan.expected is None:
            continue
        where, number = view.get("checkpoint_key"), view.get("checkpoint_line")
        found = history.checkpoints.get(where) if isinstance(where, str) else None
        if found is None or not isinstance(number, int) or not 1 <= number <= len(found):
            out.append(f"{task_id}: succeeded without a readable checkpoint line ({where!r}, {number!r})")
            continue
        line = found[number - 1]
        if line.get("id") != task_id or line.get("payload") != plan.expected:
            out.append(f"{task_id}: line {where}:{number} holds {line.get('payload')!r}, not {plan.expected!r}")
    return out


def _outcomes(history: History) -> list[str]:
    out = []
    explained = _dead_tasks(history) | _exhausted_hops(history.calls)
    late = _late_by_redelivery(history)
    for task_id, plan in history.tasks.items():
        view = history.views.get(task_id) or {}
        status = view.get("status")
        if status not in TERMINAL:
            continue  # terminal_once reports it
        if plan.flow == "late" and status != "failed":
            out.append(f"{task_id}: the late task ended {status!r}, not failed at its deadline")
        elif (
            plan.flow == "fan"
            and status == "failed"
            and task_id not in explained
            and not (view.get("error") == _TIMED_OUT and task_id in late)
        ):
            out.append(f"{task_id}: failed with nothing injected to explain it: {view.get('error')!r}")
        elif plan.flow == "fan" and status == "canceled" and plan.cancel_after is None:
            out.append(f"{task_id}: canceled, but no cancel was sent")
    return out


def _exhausted_hops(calls: Sequence[HandlerCall]) -> set[str]:
    """Tasks one of whose envelopes met a handler error on its last allowed attempt."""
    return {
        call.task_id
        for call in calls
        if call.envelope_id == call.task_id
        and call.attempt >= _MAX_ATTEMPTS
        and "handler_error" in call.invocation.faults
    }


def _by_hop(calls: Sequence[HandlerCall]) -> dict[tuple[str, str, int, int], list[HandlerCall]]:
    groups: dict[tuple[str, str, int, int], list[HandlerCall]] = defaultdict(list)
    for call in calls:
        groups[(call.actor, call.envelope_id, call.hop, call.attempt)].append(call)
    return groups


def _duplicates(calls: Sequence[HandlerCall], lease_seconds: float) -> list[str]:
    out = []
    for (actor, envelope_id, hop, attempt), group in _by_hop(calls).items():
        for index in range(1, len(group)):
            earlier = group[:index]
            if not _failed_before(earlier) and not _lease_ended(earlier, group[index], lease_seconds):
                faults = [call.invocation.faults for call in earlier]
                out.append(
                    f"{actor} ran {envelope_id} hop ({hop}, {attempt}) {index + 1} times; "
                    f"earlier runs' faults: {faults}"
                )
    return out
