"""How a running generator handler learns that its task was canceled (P-CANCEL-1..5, P-CANCEL-2..5 in
docs/protocol.md).

One :class:`CancelWatch` per invocation (SQS batch). Between two yields of a generator handler the layer asks
:meth:`CancelWatch.canceled` about the hop's task (its own id, or the parent's for a fan-out child: cancelling a task
stops its children too, P-FAN-5). The watch reads the task item's ``status`` (``TaskStore.task_status``: one
eventually consistent ``GetItem``, 0.5 read unit) at most once every ``interval`` seconds (5 s) per invocation,
counted from the batch's pre-flight read, which is itself a fresh read of every task of the batch. Between reads it
answers from the last read of that task. Once a task reads ``canceled`` it stays canceled for the invocation.

A read that fails answers "not canceled" and is logged: cancel is advisory for running work, the pre-flight of the
next hop still stops the task, so a read error must not fail a record that is otherwise healthy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["CANCEL_READ_INTERVAL_SECONDS", "CancelWatch"]

#: P-CANCEL-3: at most one cancel read per this many seconds per invocation.
CANCEL_READ_INTERVAL_SECONDS: Final = 5.0

_log = logging.getLogger(__name__)


class CancelWatch:
    """One invocation's cancel reads (see the module docstring)."""

    __slots__ = ("_canceled", "_interval", "_last_read", "_monotonic", "_read", "reads")

    def __init__(
        self,
        *,
        read: Callable[[str], str | None],
        monotonic: Callable[[], float],
        interval: float = CANCEL_READ_INTERVAL_SECONDS,
    ) -> None:
        """``read(task_id)``: the task's stored status; the cadence starts now (the pre-flight just read every task)."""
        self._read = read
        self._monotonic = monotonic
        self._interval = interval
        self._last_read = monotonic()
        self._canceled: set[str] = set()
        self.reads = 0  # how many reads this invocation made (the bench prices them)

    def canceled(self, task_id: str) -> bool:
        """Whether ``task_id`` is known canceled, reading its status when the interval since the last read passed."""
        if task_id in self._canceled:
            return True
        now = self._monotonic()
        if now - self._last_read < self._interval:
            return False
        self._last_read = now
        self.reads += 1
        try:
            status = self._read(task_id)
        except (ClientError, BotoCoreError) as exc:
            _log.warning("cancel check of task %s failed, the handler goes on: %s", task_id, exc)
            return False
        if status == "canceled":
            self._canceled.add(task_id)
            return True
        return False

    def check_for(self, task_id: str) -> Callable[[], bool]:
        """The check of one hop, as ``Handler.run`` takes it."""
        return lambda: self.canceled(task_id)
