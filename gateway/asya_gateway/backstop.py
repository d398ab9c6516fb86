"""The deadline backstop (GATEWAY section 14, PROTOCOL P-TIME-9): fail tasks that are past their deadline.

One sweep reads every shard of the ``active_deadlines`` index (``TaskStore.overdue_pages``, paginated) for entries
with ``deadline_at <= now``. The index is sparse: it holds only ``pending``/``running`` tasks with a deadline, so paused
and terminal tasks are never read (GW-BACK-5). Each entry gets the store's conditional transition to ``failed`` with
error and message ``task timed out`` (``TaskStore.time_out_overdue``, GW-BACK-2): it applies only while the task is
still ``pending``/``running`` with the same ``deadline_at``, so a task that finished, paused or was resumed with a new
deadline since the (eventually consistent) index read is left alone, and a later x-sink success is stale (first
terminal write wins, P-STAT-2, GW-BACK-4). One task's error is logged and counted and never stops the sweep;
concurrent sweeps are safe because every write is conditional. Entries left over (the Lambda running out of time,
an error) stay in the index and are picked up by the next run.

Each run emits the EMF metric ``TasksTimedOut`` (namespace ``Asya``, dimension ``Namespace``, GW-BACK-6).

Entry points: :func:`lambda_handler` (``asya_gateway.backstop.lambda_handler``, run every 60 s by an EventBridge rule,
GW-BACK-1) and :class:`Backstop` (the local mode runs ``sweep`` every few seconds). The Lambda has the gateway's
environment and reads it the same way (:class:`asya_gateway.config.GatewayConfig`): the manifest at ``ASYA_MANIFEST``
gives the namespace (metric dimension) and the default table, ``ASYA_TABLE`` overrides the table.

The handler raises :class:`BackstopError` after a sweep in which some task could not be timed out, so the failure
shows in the function's ``Errors`` metric; the tasks are retried by the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Final

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.exceptions import BotoCoreError, ClientError

from asya.exceptions import AsyaError
from asya.manifest import load_manifest
from asya.store import StoreError, TaskStore
from asya_gateway.config import GatewayConfig

__all__ = [
    "METRIC_NAME",
    "METRIC_NAMESPACE",
    "Backstop",
    "BackstopError",
    "SweepResult",
    "emit_timed_out_metric",
    "lambda_handler",
]

METRIC_NAME: Final = "TasksTimedOut"
METRIC_NAMESPACE: Final = "Asya"
#: Index entries read per query page; small pages let a sweep stop close to its time budget.
DEFAULT_PAGE_SIZE: Final = 100
#: A sweep starts no new write once the Lambda has less time left than this (the next run continues).
DEFAULT_RESERVE_SECONDS: Final = 5.0

_log = logging.getLogger(__name__)


class BackstopError(AsyaError):
    """A sweep could not time out some overdue tasks (they stay in the index for the next run)."""


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one sweep did: overdue index entries handled (``due``), tasks failed with ``task timed out``, entries whose
    condition no longer held (``skipped``: finished, paused or given a new deadline meanwhile), per-task ``errors``,
    and whether the sweep reached the end of the index (``complete``)."""

    due: int = 0
    timed_out: int = 0
    skipped: int = 0
    errors: int = 0
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def emit_timed_out_metric(namespace: str, count: int) -> None:
    """Print the EMF metric ``TasksTimedOut`` (GW-BACK-6)."""
    with single_metric(
        name=METRIC_NAME,
        unit=MetricUnit.Count,
        value=count,
        namespace=METRIC_NAMESPACE,
        default_dimensions={"Namespace": namespace},
    ):
        pass


class Backstop:
    """Sweeps the task store for overdue tasks. ``metric(namespace, count)`` is called once per sweep (``None``:
    no metric, as in the local mode)."""

    def __init__(
        self,
        store: TaskStore,
        *,
        namespace: str,
        page_size: int = DEFAULT_PAGE_SIZE,
        reserve_seconds: float = DEFAULT_RESERVE_SECONDS,
        metric: Callable[[str, int], None] | None = emit_timed_out_metric,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size!r}")
        self.store = store
        self.namespace = namespace
        self._page_size = page_size
        self._reserve = reserve_seconds
        self._metric = metric

    def sweep(self, *, time_left: Callable[[], float] | None = None) -> SweepResult:
        """One pass over the index (GW-BACK-2). ``time_left()`` gives the seconds the caller may still run; the
        sweep stops starting writes when it falls under the reserve. Errors reading the index propagate."""
        due = timed_out = skipped = errors = 0
        complete = True
        for page in self.store.long_deadline_pages(page_size=self._page_size):
            for entry in page:
                if time_left is not None and time_left() < self._reserve:
                    complete = False
                    break
                due += 1
                try:
                    done = self.store.time_out_overdue(
                        entry["id"], entry["deadline_at"], created_at=entry.get("created_at")
                    )
                except (ClientError, BotoCoreError, StoreError) as exc:
                    errors += 1
                    _log.error("backstop: could not time out task %s: %s", entry["id"], exc)
                    continue
                if done:
                    timed_out += 1
                    _log.info("backstop: task %s timed out (deadline %s)", entry["id"], entry["deadline_at"])
                else:
                    skipped += 1
            if not complete:
                break
        result = SweepResult(due=due, timed_out=timed_out, skipped=skipped, errors=errors, complete=complete)
        if self._metric is not None:
            self._metric(self.namespace, timed_out)
        return result


_BACKSTOP: Backstop | None = None


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """The scheduled Lambda entry point (GW-BACK-1); returns the sweep summary (:meth:`SweepResult.to_dict`)."""
    del event  # the EventBridge schedule event carries nothing the sweep needs
    global _BACKSTOP  # noqa: PLW0603 - one backstop per Lambda container
    if _BACKSTOP is None:
        from asya_gateway.logs import configure_logging

        configure_logging()
        config = GatewayConfig.from_env()
        manifest = load_manifest(config.manifest_path)
        _BACKSTOP = Backstop(TaskStore(table=config.table or manifest.table_name), namespace=manifest.namespace)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    time_left = None if remaining is None else (lambda: remaining() / 1000)
    result = _BACKSTOP.sweep(time_left=time_left)
    _log.info("backstop sweep: %s", result.to_dict())
    if result.errors:
        raise BackstopError(
            f"{result.errors} of {result.due} overdue tasks could not be timed out; the next run retries them"
        )
    return result.to_dict()
