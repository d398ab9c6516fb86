"""The deadline backstop of the local mode (GW-BACK-1: an overdue task fails within 5 s locally): the backstop
function's own handler, :meth:`asya_gateway.backstop.Backstop.handle`, fed in-process the way Lambda feeds it in AWS.

- **Timers**: an :class:`asya_local.esm.EventSourceMapping` (batch size 10, one poller, the function's 55 s timeout)
  long-polls ``asya-{ns}-x-deadline`` and hands the handler real SQS events, honouring its partial batch response; moto
  keeps each timer invisible for its ``DelaySeconds``, so a timer arrives when its deadline comes due.
- **The sweep** of ``long_deadlines``: a daemon thread sends the handler an EventBridge ``Scheduled Event`` every
  ``interval`` seconds (5 s here, 60 s in AWS), the first one interval after ``start``, with a
  :class:`~asya_local.lambda_event.LambdaContext` counting down from the same timeout. A sweep that raises (moto
  unreachable, per-task errors) is logged and the loop goes on, as the next scheduled run would.

``stop`` ends both: a sweep in progress sees its remaining time drop to zero and stops after its current task. No EMF
metric is printed locally (the :class:`Backstop` is built with ``metric=None``). Thread names contain ``backstop`` so
the bench's meter bills their AWS calls to the backstop.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from asya_local.esm import EsmConfig, EsmStats, EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext, function_arn, rule_arn, scheduled_event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from asya_gateway.backstop import Backstop

__all__ = ["BACKSTOP_TIMEOUT_SECONDS", "DEFAULT_BACKSTOP_INTERVAL", "BackstopLoop"]

#: GW-BACK-1 (local mode): the sweep's period.
DEFAULT_BACKSTOP_INTERVAL: Final = 5.0
#: The backstop function's timeout in AWS (``asya_cdk.backstop``): each invocation's budget.
BACKSTOP_TIMEOUT_SECONDS: Final = 55.0
#: Timers per invocation, Lambda's largest SQS batch without a batching window.
_TIMER_BATCH: Final = 10
#: moto's account.
_ACCOUNT_ID: Final = "123456789012"

_log = logging.getLogger(__name__)


class BackstopLoop:
    """Feeds ``backstop.handle`` the timers of ``queue_url`` and a scheduled sweep every ``interval`` seconds, between
    ``start`` and ``stop``."""

    def __init__(
        self,
        backstop: Backstop,
        *,
        queue_url: str,
        sqs: SQSClient,
        region: str = "us-east-1",
        interval: float = DEFAULT_BACKSTOP_INTERVAL,
        wait_seconds: int = 1,
        timeout: float = BACKSTOP_TIMEOUT_SECONDS,
    ) -> None:
        if not interval > 0:
            raise LocalModeError(f"backstop interval must be > 0 seconds, got {interval!r}")
        self._backstop = backstop
        self._interval = interval
        self._region = region
        self._timeout = timeout
        self._function = f"asya-{backstop.namespace}-backstop"
        self._esm = EventSourceMapping(
            EsmConfig(
                function_name=self._function,
                queue_url=queue_url,
                batch_size=_TIMER_BATCH,
                max_concurrency=1,
                lambda_timeout=timeout,
                wait_seconds=wait_seconds,
                region=region,
            ),
            backstop.handle,
            sqs=sqs,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sweeps = 0
        self._last: dict[str, Any] | None = None

    @property
    def sweeps(self) -> int:
        """Sweeps completed (with or without an error) since ``start``."""
        with self._lock:
            return self._sweeps

    @property
    def last_result(self) -> dict[str, Any] | None:
        """The summary of the last sweep that did not raise (``SweepResult.to_dict()``)."""
        with self._lock:
            return self._last

    @property
    def timers(self) -> EsmStats:
        """The timer event source's counters (invocations, records, failures)."""
        return self._esm.stats

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._esm.running

    def start(self) -> None:
        if self._thread is not None:
            raise LocalModeError("the backstop loop is already started")
        self._stop.clear()
        self._esm.start()
        self._thread = threading.Thread(target=self._run, name="asya-backstop-sweep", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._esm.request_stop()
        thread, self._thread = self._thread, None
        errors: list[str] = []
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                errors.append(f"the backstop sweep did not finish within {timeout} s")
        try:
            self._esm.stop(timeout)
        except LocalModeError as exc:
            errors.append(str(exc))
        if errors:
            raise LocalModeError("; ".join(errors))

    def _monotonic(self) -> float:
        # A stop request takes the whole budget away, so a long sweep ends between two tasks.
        return time.monotonic() + (self._timeout if self._stop.is_set() else 0.0)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            now = datetime.now(UTC)
            event = scheduled_event(
                rule_arn(f"{self._function}-schedule", region=self._region, account_id=_ACCOUNT_ID),
                now=now,
                region=self._region,
                account_id=_ACCOUNT_ID,
            )
            context = LambdaContext(
                function_name=self._function,
                invoked_function_arn=function_arn(self._function, region=self._region, account_id=_ACCOUNT_ID),
                memory_limit_in_mb=256,
                timeout_seconds=self._timeout,
                log_stream_name=f"{now:%Y/%m/%d}/[$LATEST]local",
                monotonic=self._monotonic,
            )
            result: dict[str, Any] | None = None
            try:
                result = self._backstop.handle(event, context)
            except Exception:
                _log.exception("backstop sweep failed; the next one runs in %s s", self._interval)
            else:
                if result.get("timed_out"):
                    _log.warning("backstop sweep: %s", result)
            with self._lock:
                self._sweeps += 1
                if result is not None:
                    self._last = result
