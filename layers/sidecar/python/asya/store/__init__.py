"""The task store shared by the layer, the crew and the gateway (PROTOCOL section 10, GATEWAY sections 4-8, 13, 14).

One DynamoDB table ``asya-{namespace}-tasks`` (keys from ``asya.tableschema``) holds per task a small task item, a
body item with the large values (or S3 ``tasks/{id}/{field}.json`` above 64 KiB) and an append-only event log with
per-task sequence numbers. Status rules (P-STAT-1, P-STAT-2, P-STAT-6, P-STAT-9) are applied by one conditional
``UpdateItem`` per event; ``asya.store.transition`` is their pure reference.

Modules: ``transition`` (rules), ``limits`` (sizes of task-item values), ``updates`` (condition expressions),
``records`` (item layout), ``bodies`` (large values), ``events`` (event log items), ``views`` (task view, status
data, list summary), ``listing`` (GW-LIST), ``writer`` (status writes), ``taskstore`` (``TaskStore``).
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
from asya.store.limits import (
    DATA_LIMIT_BYTES,
    ERROR_LIMIT_BYTES,
    MESSAGE_LIMIT_BYTES,
    NAME_LIMIT,
    clip_text,
    fit_data,
    fit_data_json,
)
from asya.store.records import is_storable_id
from asya.store.taskstore import TIMED_OUT, ApplyResult, Outcome, TaskStore
from asya.store.transition import MISSING, STATUS_ORDER, STATUSES, TERMINAL, StatusUpdate

__all__ = [
    "DATA_LIMIT_BYTES",
    "ERROR_LIMIT_BYTES",
    "MESSAGE_LIMIT_BYTES",
    "MISSING",
    "NAME_LIMIT",
    "STATUSES",
    "STATUS_ORDER",
    "TERMINAL",
    "TIMED_OUT",
    "ApplyResult",
    "FlyValue",
    "IncompleteReadError",
    "ListQueryError",
    "Outcome",
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
