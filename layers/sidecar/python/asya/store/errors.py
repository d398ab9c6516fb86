"""Errors of the task store. Every class name ends in ``Error``."""

from __future__ import annotations

from asya.exceptions import AsyaError

__all__ = [
    "IncompleteReadError",
    "ListQueryError",
    "StatusUpdateError",
    "StoreConflictError",
    "StoreError",
    "TaskExistsError",
]


class StoreError(AsyaError):
    """A task-store operation failed (AWS errors other than a failed condition propagate as ``ClientError``)."""


class TaskExistsError(StoreError):
    """``create_task`` found a task record with the same id."""


class StatusUpdateError(StoreError, ValueError):
    """A status update is malformed; the message names the field and the bad value. ``field`` and ``detail`` hold
    the two apart for the errors of a value over a size limit, so a caller can name the field its own way."""

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field = field
        self.detail = detail


class ListQueryError(StoreError, ValueError):
    """A ``list_tasks`` parameter is invalid; the message names the parameter (GW-LIST-1)."""


class StoreConflictError(StoreError):
    """A status update kept losing races against concurrent writers and gave up."""


class IncompleteReadError(StoreError):
    """A batch read kept being throttled: some keys were still unprocessed after the retries."""
