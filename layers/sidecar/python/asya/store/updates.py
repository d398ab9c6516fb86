"""The conditional ``UpdateItem`` of the task item that applies one status update (P-STAT-3, GW-DATA-3, GW-DATA-4).

Two forms, sharing the same ``SET``/``REMOVE`` clauses:

- **blind** (first attempt, no read): the condition admits exactly the cases in which the clauses are right without
  knowing the stored item: a status of higher order, a ``running`` progress update that does not lower the progress
  and changes something, a hop claim (P-ACK-8: a ``pending``/``running`` task, a progress that does not go down, the
  fence rule), the retry's fence write (P-RES-8), a resume of a ``paused`` task, the backstop on a
  ``pending``/``running`` task with the same deadline. A failed or canceled terminal write enters ``by_outcome``,
  whose key holds the task's creation day, so the blind form guesses it (the update's ``created_at_hint``, else
  today) and checks the guess with ``begins_with(created_at, :day)``; the key's shard comes from the id alone;
- **exact** (after a failed blind attempt returned the stored item): the clauses computed by
  :func:`asya.store.transition.decide` from that item, guarded by ``last_seq = :seq`` (every accepted event advances
  ``last_seq``, so an unchanged value means an unchanged status).

Every accepted update advances ``last_seq`` by one and stores that number as ``status_seq``; no event item is written
(P-STAT-3).

Placeholders are fixed per attribute (``#status``, ``:status``), so the expression text depends only on which clauses
an update needs: the clause and condition texts are built once per attribute or shape and cached (the layer writes
one or more updates per hop); only the values are built per call.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Final

from asya.store import records as rec
from asya.store.limits import MESSAGE_LIMIT_BYTES, clip_text
from asya.store.transition import MISSING, STATUS_ORDER, StatusUpdate, StoredState
from asya.timeutil import parse_ts

__all__ = [
    "OUTCOME_STATUSES",
    "RESUMED_ATTEMPT",
    "UpdateSpec",
    "attach_checkpoint",
    "blind_update",
    "claim_condition",
    "default_message",
    "exact_update",
    "has_result",
    "history_clauses",
    "is_long_deadline",
    "refence_condition",
]

#: The fence attempt a resume stores over x-pause's hop (P-RESUME-1): above any attempt a delivery can carry.
RESUMED_ATTEMPT: Final = 2**31 - 1
#: Terminal statuses listed by the sparse ``by_outcome`` index (GW-DATA-2).
OUTCOME_STATUSES: Final = frozenset({"failed", "canceled"})


class UpdateSpec:
    """An ``UpdateItem`` request on the task item, built clause by clause."""

    # a plain class, not a dataclass: generating a dataclass's methods costs the actor's cold start, and a spec is
    # only ever built up and turned into a request
    __slots__ = ("conditions", "names", "removes", "sets", "values")

    def __init__(self) -> None:
        self.sets: list[str] = []
        self.removes: list[str] = []
        self.conditions: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        placeholder = _name_placeholder(attribute)
        self.names[placeholder] = attribute
        return placeholder

    def value(self, label: str, attribute_value: dict[str, Any]) -> str:
        placeholder = _value_placeholder(label)
        self.values[placeholder] = attribute_value
        return placeholder

    def set(self, attribute: str, attribute_value: dict[str, Any]) -> None:
        name, value, clause = _set_parts(attribute)
        self.names[name] = attribute
        self.values[value] = attribute_value
        self.sets.append(clause)

    def remove(self, *attributes: str) -> None:
        self.removes.extend(self.name(attribute) for attribute in attributes)

    def request(self, table: str, task_id: str) -> dict[str, Any]:
        expression = "SET " + ", ".join(self.sets)
        if self.removes:
            expression += " REMOVE " + ", ".join(self.removes)
        request: dict[str, Any] = {
            "TableName": table,
            "Key": rec.key(task_id, rec.TASK_SK),
            "UpdateExpression": expression,
            "ConditionExpression": "(" + ") AND (".join(self.conditions) + ")" if self.conditions else "",
            "ExpressionAttributeNames": self.names,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request


@cache
def _name_placeholder(attribute: str) -> str:
    return f"#{attribute}"


@cache
def _value_placeholder(label: str) -> str:
    return f":{label}"


@cache
def _set_parts(attribute: str) -> tuple[str, str, str]:
    """Name placeholder, value placeholder and ``SET`` clause of ``attribute``."""
    return f"#{attribute}", f":{attribute}", f"#{attribute} = :{attribute}"


def default_message(update: StatusUpdate) -> str:
    """The informative ``message`` of an update that carries none."""
    if update.message is not None:
        return update.message
    actor = update.actor or "actor"
    data = update.data
    if update.resume:
        return "Resumed"
    if update.step == "received":
        size = data.get("message_size_kb")
        return f"Received by {actor} ({size} KB)" if size is not None else f"Received by {actor}"
    if update.step == "processing":
        return f"Processing in {actor}"
    if update.step == "completed":
        duration = data.get("duration_ms")
        return f"Completed in {actor} in {duration} ms" if duration is not None else f"Completed in {actor}"
    if update.step == "retrying":
        attempt = data.get("attempt")
        return f"Retrying {actor} (attempt {attempt})" if attempt is not None else f"Retrying {actor}"
    if update.status == "succeeded":
        return "Completed"
    if update.status == "failed":
        return update.error or "task failed"
    if update.status == "canceled":
        return "Canceled"
    if update.status == "paused" and update.pause_metadata is not None:
        prompt = update.pause_metadata.get("prompt")
        # the prompt can be long (it lives whole in pause_metadata): the status line gets its head
        return clip_text(prompt, MESSAGE_LIMIT_BYTES) if isinstance(prompt, str) else "Task paused"
    return update.status.capitalize()


def _clauses(
    spec: UpdateSpec,
    update: StatusUpdate,
    *,
    task_id: str,
    now: datetime,
    now_ms: str,
    day: str,
    progress: float | None,
) -> None:
    spec.set("status", rec.str_av(update.status))
    spec.set("status_order", rec.num_av(update.order))
    spec.set("updated_at", rec.str_av(now_ms))
    spec.set("message", rec.str_av(default_message(update)))
    if update.data:
        spec.set("data", rec.str_av(update.data_json))
    else:
        spec.remove("data")
    spec.names["#last_seq"] = "last_seq"
    spec.values[":one"] = {"N": "1"}
    spec.sets.append("#last_seq = #last_seq + :one")
    # the number of this change (the right-hand side reads the old last_seq): a follower that sees it knows it is a
    # status change, not a fly flush still being written, and need not hold it back (GW-SSE-6)
    spec.names["#status_seq"] = "status_seq"
    spec.sets.append("#status_seq = #last_seq + :one")
    if update.actor is not None and update.status == "running":
        spec.set("current_actor", rec.str_av(update.actor))
    if update.step is not None:
        spec.set("step", rec.str_av(update.step))
    elif update.status == "succeeded":
        # GW-TASK-2 example: a succeeded task shows its last hop completed, also when `hops` progress wrote none.
        spec.set("step", rec.str_av("completed"))
    if progress is not None:
        spec.set("progress_percent", rec.num_av(progress))
    if update.claim is not None:
        _claim_clauses(spec, update.claim)
    if update.history is not None:
        history_clauses(spec, update.history)
    if update.refence is not None:
        spec.set("fence_a", rec.num_av(update.refence[1] + 1))
        spec.set("lease_until", rec.num_av(0))
    if update.resume:
        # the resume raises the fence to (h_pause, maximum): a redelivered x-pause is a duplicate (P-RESUME-1)
        spec.set("fence_a", rec.num_av(RESUMED_ATTEMPT))
        spec.set("lease_until", rec.num_av(0))
        spec.remove("remaining_seconds")
        spec.remove("waiting_event")
        if update.pause_timed_out:
            spec.set("pause_timed_out_at", rec.str_av(now_ms))
        if update.deadline_at is None:
            spec.remove("deadline_at", "gsi3pk", "gsi3sk")
        else:
            spec.set("deadline_at", rec.str_av(update.deadline_at))
            if is_long_deadline(update.deadline_at, now):
                spec.set("gsi3pk", rec.str_av(rec.deadline_shard(task_id)))
                spec.set("gsi3sk", rec.str_av(update.deadline_at))
            else:
                spec.remove("gsi3pk", "gsi3sk")
    elif update.status == "paused":
        spec.remove("deadline_at", "gsi3pk", "gsi3sk", "pause_timed_out_at")
        event = update.pause_metadata.get("event") if update.pause_metadata is not None else None
        if isinstance(event, str):  # a wait_for: a signal of this event is delivered, not buffered (P-WAIT-5)
            spec.set("waiting_event", rec.str_av(event))
        else:
            spec.remove("waiting_event")
        if update.remaining_seconds is None:
            spec.remove("remaining_seconds")
        else:
            spec.set("remaining_seconds", rec.num_av(update.remaining_seconds))
    elif update.terminal:
        spec.remove("gsi3pk", "gsi3sk", "remaining_seconds")
        spec.set("ttl", rec.num_av(rec.epoch(now + rec.TERMINAL_TTL)))
        if update.status in OUTCOME_STATUSES:
            spec.set("gsi2pk", rec.str_av(rec.outcome_index_pk(update.status, day, rec.index_shard(task_id))))
        if update.status == "failed":
            spec.set("error", rec.str_av(update.error or "task failed"))
            if update.failed_actor is not None:
                spec.set("failed_actor", rec.str_av(update.failed_actor))
                # the task reads where it failed, not the last actor its own lineage claimed (a failed fan-out
                # child's slice fails its task from another actor, P-FAN-7)
                spec.set("current_actor", rec.str_av(update.failed_actor))
        if update.checkpoint_key is not None:
            spec.set("checkpoint_key", rec.str_av(update.checkpoint_key))
            if update.checkpoint_line is not None:
                spec.set("checkpoint_line", rec.num_av(update.checkpoint_line))
        if update.writer_id is not None:
            spec.set("terminal_by", rec.str_av(update.writer_id))
        if update.inline_result is not None:
            # a result that fits rides on this write: no result item (GW-DATA-8)
            spec.set("result", rec.str_av(update.inline_result))
        elif update.status == "succeeded" and update.result_span is not None:
            # the checkpoint line this write names holds the result: no result item (GW-DATA-10)
            spec.set("result_span", rec.str_av(rec.span_text(update.result_span)))
        elif has_result(update):
            spec.set("has_result", {"BOOL": True})


def has_result(update: StatusUpdate) -> bool:
    """Whether a terminal update has values for the task's result item (GW-DATA-2); a result kept on the task item
    (GW-DATA-8) or read from its checkpoint line (GW-DATA-10) has none."""
    kept = update.inline_result is not None or update.result_span is not None
    return (update.status == "succeeded" and update.result is not MISSING and not kept) or (
        update.status == "failed" and update.error_details is not None
    )


def is_long_deadline(deadline_at: str, now: datetime) -> bool:
    """Whether ``deadline_at`` is too far away for one SQS timer: the task goes into ``long_deadlines`` (GW-BACK-1)."""
    deadline = parse_ts(deadline_at)
    return deadline is not None and (deadline - now).total_seconds() > rec.LONG_DEADLINE_SECONDS


def history_clauses(spec: UpdateSpec, history: tuple[str, str | None]) -> None:
    """The run history's chain head on the item the hop claim writes (P-HIST-4): ``history_key`` is the object the
    claiming invocation writes, ``history_prev`` the one before it (read while the head is still being written)."""
    key, prev = history
    spec.set("history_key", rec.str_av(key))
    if prev is None:
        spec.remove("history_prev")
    else:
        spec.set("history_prev", rec.str_av(prev))


def _claim_clauses(spec: UpdateSpec, claim: tuple[int, int, int]) -> None:
    hop, attempt, lease_until = claim
    spec.set("fence_h", rec.num_av(hop))
    spec.set("fence_a", rec.num_av(attempt))
    spec.set("lease_until", rec.num_av(lease_until))


def claim_condition(spec: UpdateSpec, claim: tuple[int, int, int], now_ms: int) -> str:
    """P-ACK-8: no fence stored, a lower one, or an equal one whose lease has passed."""
    hop, attempt, _ = claim
    spec.names["#fence_h"] = "fence_h"
    spec.names["#fence_a"] = "fence_a"
    spec.names["#lease_until"] = "lease_until"
    spec.values[":fh"] = rec.num_av(hop)
    spec.values[":fa"] = rec.num_av(attempt)
    spec.values[":now_ms"] = rec.num_av(now_ms)
    return _CLAIM_CONDITION


def refence_condition(spec: UpdateSpec, fence: tuple[int, int]) -> str:
    """P-RES-8: the stored fence is exactly ``fence``."""
    spec.names["#fence_h"] = "fence_h"
    spec.names["#fence_a"] = "fence_a"
    spec.values[":rh"] = rec.num_av(fence[0])
    spec.values[":ra"] = rec.num_av(fence[1])
    return "#fence_h = :rh AND #fence_a = :ra"


_CLAIM_CONDITION: Final = (
    "attribute_not_exists(#fence_h) OR #fence_h < :fh OR (#fence_h = :fh AND #fence_a < :fa)"
    " OR (#fence_h = :fh AND #fence_a = :fa AND #lease_until < :now_ms)"
)


def blind_update(update: StatusUpdate, *, task_id: str, now: datetime, now_ms: str, day: str) -> UpdateSpec:
    """The first attempt: no read, the condition admits only the cases its clauses are right for."""
    spec = UpdateSpec()
    progress = 100.0 if update.status == "succeeded" else (update.progress if update.status == "running" else None)
    if update.resume:
        progress = None
    _clauses(spec, update, task_id=task_id, now=now, now_ms=now_ms, day=day, progress=progress)
    spec.names["#pk"] = "pk"
    spec.conditions.append("attribute_exists(#pk)")
    if update.status in OUTCOME_STATUSES:
        # the by_outcome key holds the creation day: the guess is checked, a wrong one takes the exact path
        spec.names["#created_at"] = "created_at"
        spec.values[":day"] = rec.str_av(day)
        spec.conditions.append("begins_with(#created_at, :day)")
    status, order = spec.name("status"), spec.name("status_order")
    if update.refence is not None:
        spec.conditions.append(refence_condition(spec, update.refence))
    if update.if_fence_at_most is not None:
        spec.conditions.append(_fence_at_most_condition(spec, update.if_fence_at_most))
    if update.if_deadline_at is not None:
        spec.conditions.append(f"{order} < {spec.value('two', rec.num_av(2))}")
        spec.conditions.append(f"{spec.name('deadline_at')} = {spec.value('dl', rec.str_av(update.if_deadline_at))}")
    if update.resume:
        spec.conditions.append(f"{status} = {spec.value('paused', rec.str_av('paused'))}")
        if update.pause_fence is not None:
            # the end of this pause, not of a later one of the same task (P-WAIT-2, P-WAIT-5)
            spec.conditions.append(refence_condition(spec, update.pause_fence))
    elif update.claim is not None or update.refence is not None:
        # a hop claim, and the retry's fence write, is never stale as a progress update (P-STAT-6): a pending or
        # running task, a progress that does not go down, and the fence rule
        spec.conditions.append(f"{order} <= {spec.value('one_order', rec.num_av(STATUS_ORDER['running']))}")
        if progress is not None:
            spec.conditions.append(
                f"attribute_not_exists({spec.name('progress_percent')}) OR "
                f"{spec.name('progress_percent')} <= {spec.value('progress_percent', rec.num_av(progress))}"
            )
        if update.claim is not None:
            spec.conditions.append(claim_condition(spec, update.claim, rec.epoch_ms(now)))
    elif update.status == "running":
        spec.conditions.append(_running_condition(spec, update))
    else:
        spec.conditions.append(f"{order} < {spec.value('order', rec.num_av(update.order))}")
    return spec


def _running_condition(spec: UpdateSpec, update: StatusUpdate) -> str:
    spec.names["#status_order"] = "status_order"
    spec.values[":one_order"] = rec.num_av(STATUS_ORDER["running"])
    if update.actor is not None:
        spec.names["#current_actor"] = "current_actor"
        spec.values[":actor"] = rec.str_av(update.actor)
    if update.step is not None:
        spec.names["#step"] = "step"
        spec.values[":step"] = rec.str_av(update.step)
    if update.progress is not None:
        spec.names["#progress_percent"] = "progress_percent"
        spec.values[":p"] = rec.num_av(update.progress)
    changes = update.actor is not None or update.step is not None or update.progress is not None
    if changes:
        spec.names["#status"] = "status"
        spec.values[":running"] = rec.str_av("running")
    return _running_condition_text(update.actor is not None, update.step is not None, update.progress is not None)


@cache
def _running_condition_text(actor: bool, step: bool, progress: bool) -> str:
    """The condition text of :func:`_running_condition` for an update carrying these members."""
    same: list[str] = []
    guards: list[str] = []
    if actor:
        same.append("#current_actor = :actor")
    if step:
        same.append("#step = :step")
    if progress:
        guards.append("#progress_percent <= :p")
        same.append("#progress_percent = :p")
    from_lower = "#status_order < :one_order"
    if not same:
        # a bare running event on a running task changes nothing: only a pending task accepts it
        return from_lower
    on_running = " AND ".join(["#status = :running", *guards, f"NOT ({' AND '.join(same)})"])
    return f"{from_lower} OR ({on_running})"


def exact_update(
    update: StatusUpdate, stored: StoredState, *, task_id: str, now: datetime, now_ms: str, progress: float | None
) -> UpdateSpec:
    """The retry after a failed blind attempt: clauses from the stored item, guarded by its ``last_seq``."""
    spec = UpdateSpec()
    day = rec.day_of(stored.created_at)
    _clauses(spec, update, task_id=task_id, now=now, now_ms=now_ms, day=day, progress=progress)
    spec.conditions.append(f"attribute_exists({spec.name('pk')})")
    spec.conditions.append(f"{spec.name('last_seq')} = {spec.value('seq', rec.num_av(stored.last_seq))}")
    if update.claim is not None:
        spec.conditions.append(claim_condition(spec, update.claim, rec.epoch_ms(now)))
    if update.refence is not None:
        spec.conditions.append(refence_condition(spec, update.refence))
    if update.if_fence_at_most is not None:
        spec.conditions.append(_fence_at_most_condition(spec, update.if_fence_at_most))
    return spec


def _fence_at_most_condition(spec: UpdateSpec, hop: int) -> str:
    """GW-EVT-3: a reporter's event is stale once a later hop stored its fence."""
    spec.names["#fence_h"] = "fence_h"
    spec.values[":max_fh"] = rec.num_av(hop)
    return "attribute_not_exists(#fence_h) OR #fence_h <= :max_fh"


def attach_checkpoint(checkpoint_key: str, checkpoint_line: int | None) -> UpdateSpec:
    """Attach the crew's checkpoint to a task that has none (P-STAT-2): no status change, ``last_seq`` unchanged."""
    spec = UpdateSpec()
    spec.set("checkpoint_key", rec.str_av(checkpoint_key))
    if checkpoint_line is not None:
        spec.set("checkpoint_line", rec.num_av(checkpoint_line))
    spec.conditions.append(f"attribute_exists({spec.name('pk')})")
    spec.conditions.append(f"attribute_not_exists({spec.name('checkpoint_key')})")
    return spec
