"""The task store shared by the layer, the crew and the gateway (docs/protocol.md 6.1; docs/http.md, "The task store").

One DynamoDB table ``asya-{namespace}-tasks`` (keys from ``asya.tableschema``) holds per task a small hot task item
(status, progress, the hop fence and lease), body, result and pause items with the large values (or S3
``tasks/{id}/{field}.json`` above 64 KiB), child fence items and an append-only log of FLY items numbered by the task
item's ``last_seq``. Status rules (P-STAT-1, P-STAT-2, P-STAT-6, P-STAT-9) and the hop claim (P-ACK-8) are applied by
one conditional ``UpdateItem`` each; ``asya.store.transition`` is the rules' pure reference.

Modules: ``transition`` (rules), ``limits`` (sizes of task-item values), ``updates`` (condition expressions),
``records`` (item layout), ``bodies`` (large values), ``events`` (FLY items), ``views`` (task view, status data, list
summary), ``listing`` (GW-LIST), ``writer`` (status writes), ``fences`` (fence-only writes), ``taskstore``
(``TaskStore``).
"""

from __future__ import annotations

from asya.store.errors import (
    IncompleteReadError,
    ListQueryError,
    StatusUpdateError,
    StoreConflictError,
    StoreError,
    TaskExistsError,
)
from asya.store.events import FlyValue
from asya.store.fences import ChildFinish, ChildOutcome
from asya.store.limits import (
    DATA_LIMIT_BYTES,
    ERROR_LIMIT_BYTES,
    MESSAGE_LIMIT_BYTES,
    NAME_LIMIT,
    clip_text,
    fit_data,
    fit_data_json,
)
from asya.store.records import LONG_DEADLINE_SECONDS, is_storable_id
from asya.store.taskstore import TIMED_OUT, ApplyResult, Outcome, RunningFields, Snapshot, TaskStore
from asya.store.transition import MISSING, STATUS_ORDER, STATUSES, TERMINAL, StatusUpdate

__all__ = [
    "DATA_LIMIT_BYTES",
    "ERROR_LIMIT_BYTES",
    "LONG_DEADLINE_SECONDS",
    "MESSAGE_LIMIT_BYTES",
    "MISSING",
    "NAME_LIMIT",
    "STATUSES",
    "STATUS_ORDER",
    "TERMINAL",
    "TIMED_OUT",
    "ApplyResult",
    "ChildFinish",
    "ChildOutcome",
    "FlyValue",
    "IncompleteReadError",
    "ListQueryError",
    "Outcome",
    "RunningFields",
    "Snapshot",
    "StatusUpdate",
    "StatusUpdateError",
    "StoreConflictError",
    "StoreError",
    "TaskExistsError",
    "TaskStore",
    "clip_text",
    "fit_data",
    "fit_data_json",
    "is_storable_id",
]
