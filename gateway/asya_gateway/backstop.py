"""The deadline backstop function (GW-BACK-1..6, P-TIME-9): fail tasks past their deadline.

One Lambda entry point, :func:`lambda_handler`, takes two kinds of event:

- **timers**, an SQS event from ``asya-{ns}-x-deadline`` (``asya_gateway.timers``; the event source mapping has
  ``ReportBatchItemFailures``). Per record: read the task item (one strongly consistent ``GetItem`` of ``status`` and
  ``deadline_at``); drop the timer when the task is unknown, terminal, paused (GW-BACK-5) or its ``deadline_at``
  differs from the timer's (re-deadlined by a resume, P-TIME-9); re-arm it when it came due before its deadline (an
  SQS delay stops at 900 s); else apply ``TaskStore.time_out_overdue`` (the conditional transition to ``failed`` with
  ``task timed out``, GW-BACK-2), whose failed condition (the task finished or moved meanwhile) also drops it. The
  read comes first because most timers find their task finished, and a read costs a fifth of a failed conditional
  write. A record whose body is not a timer, or whose read, write or re-arm failed, is listed in
  ``batchItemFailures``: SQS delivers it again after the queue's visibility timeout and, after ``maxReceiveCount``,
  moves it to the DLQ where it stays visible. A drop is logged at debug level.
- **the sweep**, an EventBridge scheduled event (``source: aws.events``, every 60 s): the due entries of the sparse
  ``long_deadlines`` index (``TaskStore.long_deadline_pages``) each get ``time_out_overdue``, until the invocation has
  less than ``reserve_seconds`` left; the rest waits for the next run. Per-task errors are counted and, after the
  sweep, raise :class:`BackstopError` so the function's ``Errors`` metric (and alarm) shows them.

One task's error never stops the others. Concurrent and repeated deliveries are safe: every write is conditional
(first terminal write wins, P-STAT-2, GW-BACK-4), and a duplicate timer only finds its task already failed. Each
invocation emits the EMF metric ``TasksTimedOut`` (namespace ``Asya``, dimension ``Namespace``, GW-BACK-6) with the
number of tasks it failed.

The Lambda has the gateway's environment (:class:`asya_gateway.config.GatewayConfig`): ``ASYA_MANIFEST`` gives the
namespace and the default table, ``ASYA_TABLE`` overrides the table, ``ASYA_ACCOUNT_ID`` builds the timer queue's URL.
The local mode (``asya_local.backstop_loop``) feeds the same :meth:`Backstop.handle` with real SQS events and
scheduled events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from botocore.exceptions import BotoCoreError, ClientError

from asya.awsclients import BACKSTOP_BUDGET
from asya.countmetric import METRICS_NAMESPACE, emit_count
from asya.exceptions import AsyaError
from asya.manifest import load_manifest
from asya.store import StoreError, TaskStore
from asya.store import records as rec
from asya.timeutil import Clock, system_clock
from asya_gateway.config import GatewayConfig
from asya_gateway.timers import DeadlineTimers, Timer, TimerError, TimerMessageError

__all__ = [
    "METRIC_NAME",
    "METRIC_NAMESPACE",
    "Backstop",
    "BackstopError",
    "BackstopEventError",
    "SweepResult",
    "TimerBatchResult",
    "emit_timed_out_metric",
    "lambda_handler",
]

METRIC_NAME: Final = "TasksTimedOut"
METRIC_NAMESPACE: Final = METRICS_NAMESPACE
#: Index entries read per query page; small pages let a sweep stop close to its time budget.
DEFAULT_PAGE_SIZE: Final = 100
#: A sweep starts no new write once the Lambda has less time left than this (the next run continues).
DEFAULT_RESERVE_SECONDS: Final = 5.0

_ACTIVE: Final = frozenset({"pending", "running"})
#: Failures of one task's read or write: counted against that task only.
_TASK_ERRORS: Final = (ClientError, BotoCoreError, StoreError, TimerError)

#: What became of one timer.
_Outcome = Literal["timed_out", "rearmed", "dropped"]

_log = logging.getLogger(__name__)


class BackstopError(AsyaError):
    """A sweep could not time out some overdue tasks (they stay in the index for the next run)."""


class BackstopEventError(AsyaError, ValueError):
    """The function got an event that is neither an SQS event nor a scheduled event."""


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


@dataclass(frozen=True, slots=True)
class TimerBatchResult:
    """What one SQS batch of timers did: tasks failed (``timed_out``), timers ``dropped`` (task unknown, terminal,
    paused, re-deadlined, or a lost race), timers ``rearmed`` (came due early), and the message ids that ``failed``
    (malformed body or an AWS error; SQS redelivers them)."""

    timed_out: int = 0
    dropped: int = 0
    rearmed: int = 0
    failed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failed": list(self.failed)}

    def response(self) -> dict[str, Any]:
        """The Lambda answer for an SQS event source with ``ReportBatchItemFailures``."""
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in self.failed]}


def emit_timed_out_metric(namespace: str, count: int) -> None:
    """Print the EMF metric ``TasksTimedOut`` (GW-BACK-6)."""
    emit_count(METRIC_NAME, count, {"Namespace": namespace})


class Backstop:
    """Fails overdue tasks from timers and from the ``long_deadlines`` sweep. ``metric(namespace, count)`` is called
    once per batch or sweep (``None``: no metric, as in the local mode)."""

    def __init__(
        self,
        store: TaskStore,
        *,
        namespace: str,
        timers: DeadlineTimers,
        clock: Clock = system_clock,
        page_size: int = DEFAULT_PAGE_SIZE,
        reserve_seconds: float = DEFAULT_RESERVE_SECONDS,
        metric: Callable[[str, int], None] | None = emit_timed_out_metric,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size!r}")
        self.store = store
        self.namespace = namespace
        self.timers = timers
        self._clock = clock
        self._page_size = page_size
        self._reserve = reserve_seconds
        self._metric = metric

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """Dispatch one Lambda event: an SQS event (timers) answers the partial batch response, a scheduled event
        (the sweep) its summary. Raises :class:`BackstopEventError` for anything else, :class:`BackstopError` after
        a sweep with per-task errors."""
        if _is_sqs_event(event):
            result = self.handle_timers(event["Records"])
            if result.timed_out or result.failed:
                _log.info("backstop timers: %s", result.to_dict())
            return result.response()
        if _is_scheduled_event(event):
            sweep = self.sweep(time_left=_time_left(context))
            # a sweep that found nothing is no news: at DEBUG, or `asya dev` prints it every few seconds
            _log.log(
                logging.INFO if sweep.due or not sweep.complete else logging.DEBUG,
                "backstop sweep: %s",
                sweep.to_dict(),
            )
            if sweep.errors:
                raise BackstopError(
                    f"{sweep.errors} of {sweep.due} overdue tasks could not be timed out; the next run retries them"
                )
            return sweep.to_dict()
        raise BackstopEventError(f"the backstop takes an SQS event or a scheduled event, got {_describe(event)}")

    # ------------------------------------------------------------------ timers

    def handle_timers(self, records: Iterable[Mapping[str, Any]]) -> TimerBatchResult:
        """Handle the records of one SQS batch of timers (GW-BACK-1, -2, -5)."""
        timed_out = dropped = rearmed = 0
        failed: list[str] = []
        for record in records:
            message_id = str(record.get("messageId", ""))
            try:
                outcome = self._handle_timer(Timer.from_body(str(record.get("body", ""))))
            except TimerMessageError as exc:
                _log.error("backstop: message %s is not a deadline timer: %s", message_id, exc)
                failed.append(message_id)
                continue
            except _TASK_ERRORS as exc:
                _log.error("backstop: timer message %s failed, SQS will deliver it again: %s", message_id, exc)
                failed.append(message_id)
                continue
            if outcome == "timed_out":
                timed_out += 1
            elif outcome == "rearmed":
                rearmed += 1
            else:
                dropped += 1
        if self._metric is not None:
            self._metric(self.namespace, timed_out)
        return TimerBatchResult(timed_out=timed_out, dropped=dropped, rearmed=rearmed, failed=tuple(failed))

    def _handle_timer(self, timer: Timer) -> _Outcome:
        state = self._deadline_state(timer.task_id)
        if state is None:
            _log.debug("backstop: timer of task %s dropped: no such task", timer.task_id)
            return "dropped"
        status, deadline_at = state
        if status not in _ACTIVE or deadline_at != timer.deadline_at:
            _log.debug(
                "backstop: timer of task %s for %s dropped: task is %s with deadline %s",
                timer.task_id,
                timer.deadline_at,
                status,
                deadline_at,
            )
            return "dropped"
        if self._clock() < timer.deadline:
            delay = self.timers.rearm(timer)
            _log.debug("backstop: timer of task %s came due early, re-armed for %s s", timer.task_id, delay)
            return "rearmed"
        if self.store.time_out_overdue(timer.task_id, timer.deadline_at):
            _log.info("backstop: task %s timed out (deadline %s)", timer.task_id, timer.deadline_at)
            return "timed_out"
        return "dropped"

    def _deadline_state(self, task_id: str) -> tuple[str | None, str | None] | None:
        """``(status, deadline_at)`` of the task item, strongly consistent (a stale read could drop the timer of a
        task just resumed); ``None`` for no task or an expired one (GW-DATA-5)."""
        item = self.store.dynamodb.get_item(
            TableName=self.store.table,
            Key=rec.key(task_id, rec.TASK_SK),
            ConsistentRead=True,
            ProjectionExpression="#s, deadline_at, #t",
            ExpressionAttributeNames={"#s": "status", "#t": "ttl"},
        ).get("Item")
        if item is None or rec.is_expired(item, self._clock()):
            return None
        return rec.get_str(item, "status"), rec.get_str(item, "deadline_at")

    # ------------------------------------------------------------------ sweep

    def sweep(self, *, time_left: Callable[[], float] | None = None) -> SweepResult:
        """One pass over the due ``long_deadlines`` entries (GW-BACK-1, -2). ``time_left()`` gives the seconds the
        caller may still run; the sweep stops starting writes when it falls under the reserve. Errors reading the
        index propagate."""
        due = timed_out = skipped = errors = 0
        complete = True
        for page in self.store.long_deadline_pages(page_size=self._page_size):
            for entry in page:
                if time_left is not None and time_left() < self._reserve:
                    complete = False
                    break
                due += 1
                try:
                    done = self.store.time_out_overdue(entry["id"], entry["deadline_at"])
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


def _is_sqs_event(event: Any) -> bool:
    records = event.get("Records") if isinstance(event, Mapping) else None
    return (
        isinstance(records, list)
        and bool(records)
        and all(isinstance(r, Mapping) and r.get("eventSource") == "aws:sqs" for r in records)
    )


def _is_scheduled_event(event: Any) -> bool:
    return isinstance(event, Mapping) and (
        event.get("source") == "aws.events" or event.get("detail-type") == "Scheduled Event"
    )


def _describe(event: Any) -> str:
    if isinstance(event, Mapping):
        return f"an object with keys {sorted(str(k) for k in event)[:10]}"
    return f"a {type(event).__name__}"


def _time_left(context: Any) -> Callable[[], float] | None:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return lambda: float(remaining()) / 1000


_BACKSTOP: Backstop | None = None


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda entry point (``asya_gateway.backstop.lambda_handler``): timers and the scheduled sweep."""
    global _BACKSTOP  # noqa: PLW0603 - one backstop per Lambda container
    if _BACKSTOP is None:
        from asya_gateway.logs import configure_logging

        configure_logging()
        config = GatewayConfig.from_env()
        manifest = load_manifest(config.manifest_path)
        _BACKSTOP = Backstop(
            TaskStore(table=config.table or manifest.table_name, budget=BACKSTOP_BUDGET),
            namespace=manifest.namespace,
            timers=DeadlineTimers(namespace=manifest.namespace, account_id=config.account_id, budget=BACKSTOP_BUDGET),
        )
    return _BACKSTOP.handle(event, context)
