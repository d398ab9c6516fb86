"""The functions of an artifact mesh: a pool of interpreters per function, and the triggers that invoke them.

:class:`FunctionPool` lends an idle :class:`~asya_local.artifact.process.FunctionProcess` to each invocation and
starts another (up to ``max_processes``) when all are busy, as Lambda adds execution environments; one is started
with the pool so an import error shows at once. :meth:`FunctionPool.handler` is the
:data:`~asya_local.esm.Handler` an :class:`~asya_local.esm.EventSourceMapping` calls: a handler error raises
(the ESM leaves the whole batch to come back after its visibility timeout), and without ``ReportBatchItemFailures``
on the mapping a returned ``batchItemFailures`` means nothing (every record succeeded), as in Lambda.

:class:`ScheduleTrigger` sends an EventBridge ``Scheduled Event`` to its function every ``interval`` seconds (the
mesh's local interval; the rule's own ``rate(...)`` is only reported), the first one an interval after start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from asya_local.artifact.process import FunctionProcess
from asya_local.esm import Handler
from asya_local.lambda_event import LambdaContext, function_arn, rule_arn, scheduled_event

__all__ = ["FunctionPool", "ScheduleTrigger"]

_log = logging.getLogger(__name__)


class FunctionPool:
    """Execution environments of one function."""

    def __init__(self, name: str, new_process: Callable[[], FunctionProcess], *, max_processes: int = 3) -> None:
        self.name = name
        self._new_process = new_process
        self._max = max_processes
        self._idle: list[FunctionProcess] = []
        self._all: list[FunctionProcess] = []
        self._available = threading.Condition()
        self._starting = 0
        #: environments busy when the code was replaced: stopped when their invocation ends
        self._retired: set[FunctionProcess] = set()
        self.invocations = 0
        self.errors = 0

    def start(self) -> FunctionProcess:
        process = self._new_process()
        process.start()
        with self._available:
            self._all.append(process)
            self._idle.append(process)
        return process

    def _acquire(self) -> FunctionProcess:
        with self._available:
            while not self._idle and len(self._all) + self._starting >= self._max:
                self._available.wait()
            if self._idle:
                return self._idle.pop()
            self._starting += 1
        try:
            process = self._new_process()
            process.start()
        finally:
            with self._available:
                self._starting -= 1
                self._available.notify()
        with self._available:
            self._all.append(process)
        return process

    def _release(self, process: FunctionProcess) -> None:
        with self._available:
            retired = process in self._retired
            if retired:
                self._retired.discard(process)
                self._all.remove(process)
            else:
                self._idle.append(process)
            self._available.notify()
        if retired:
            process.stop()

    def redeploy(self, new_process: Callable[[], FunctionProcess]) -> None:
        """Lambda's code update: every later invocation runs in an environment from ``new_process``; the idle
        environments are stopped now, the busy ones when their invocation ends."""
        with self._available:
            self._new_process = new_process
            idle, self._idle = self._idle, []
            for process in idle:
                self._all.remove(process)
            self._retired = set(self._all)
            self._available.notify_all()
        for process in idle:
            process.stop()

    def invoke(self, event: Any, context: LambdaContext) -> Any:
        process = self._acquire()
        try:
            with self._available:
                self.invocations += 1
            return process.invoke(event, context)
        except Exception:
            with self._available:
                self.errors += 1
            raise
        finally:
            self._release(process)

    def handler(self, *, report_batch_item_failures: bool = True) -> Handler:
        def invoke(event: dict[str, Any], context: LambdaContext) -> Any:
            result = self.invoke(event, context)
            return result if report_batch_item_failures else None

        return invoke

    @property
    def processes(self) -> list[FunctionProcess]:
        with self._available:
            return list(self._all)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


class ScheduleTrigger:
    """A schedule rule's target, invoked every ``interval`` seconds."""

    def __init__(
        self,
        pool: FunctionPool,
        *,
        rule_name: str,
        function_name: str,
        interval: float,
        timeout: float,
        memory: int,
        region: str,
        account_id: str,
        monotonic: Callable[[], float],
    ) -> None:
        self._pool = pool
        self._rule = rule_name
        self._function = function_name
        self._interval = interval
        self._timeout = timeout
        self._memory = memory
        self._region = region
        self._account_id = account_id
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"schedule-{self._rule}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timeout + 5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            now = datetime.now(UTC)
            event = scheduled_event(
                rule_arn(self._rule, region=self._region, account_id=self._account_id),
                now=now,
                region=self._region,
                account_id=self._account_id,
            )
            context = LambdaContext(
                function_name=self._function,
                invoked_function_arn=function_arn(self._function, region=self._region, account_id=self._account_id),
                memory_limit_in_mb=self._memory,
                timeout_seconds=self._timeout,
                log_stream_name=f"{now:%Y/%m/%d}/[$LATEST]schedule",
                monotonic=self._monotonic,
            )
            try:
                self._pool.invoke(event, context)
            except Exception as exc:  # the next scheduled run comes anyway, as EventBridge's would
                _log.warning("schedule %s: %s", self._rule, exc)
            self.runs += 1
