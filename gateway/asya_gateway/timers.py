"""Deadline timers (GW-BACK-1, GW-CREATE-7 step 6, P-TIME-9): arming and the timer message.

A task whose deadline is at most ``LONG_DEADLINE_SECONDS`` (900 s) away gets one timer: an SQS message
``{"id": "<task id>", "deadline_at": "<ts>"}`` on the crew queue ``asya-{ns}-x-deadline`` (``asya.naming.DEADLINE``)
with ``DelaySeconds = ceil(deadline_at - now)`` (0..900), so it becomes visible when the deadline comes due and the
backstop function (``asya_gateway.backstop``) fails the task if it is still ``pending``/``running`` with that deadline.
A deadline further away sends nothing: the store puts the task in the sparse ``long_deadlines`` index at create (or
resume), which the backstop sweeps every 60 s. Nothing ever disarms a timer: the backstop drops a timer whose task is
terminal, paused (its stored ``deadline_at`` is null, GW-BACK-5) or re-deadlined. The 300 s default deadline thus
costs one ``SendMessage`` (and one receive and delete by the event source) and no index write.

The queue URL is built from the SQS client's endpoint, the account id (``ASYA_ACCOUNT_ID``, read by
:class:`asya_gateway.config.GatewayConfig`) and the queue name, without ``GetQueueUrl`` (GW-CREATE-7); without an
account id (an older deployment) it is looked up once with ``GetQueueUrl`` and cached.

:meth:`DeadlineTimers.arm` is what the create route calls, and what a resume route calls for a renewed deadline;
:meth:`DeadlineTimers.send` is the backstop's re-arm of a timer that came due early. A failed send raises
:class:`TimerError` carrying the AWS error code: a timer is never silently lost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import naming
from asya.awsclients import GATEWAY_BUDGET, ClientBudget, aws_client
from asya.exceptions import AsyaError
from asya.store import LONG_DEADLINE_SECONDS
from asya.timeutil import Clock, parse_ts, system_clock

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

__all__ = [
    "MAX_DELAY_SECONDS",
    "DeadlineTimers",
    "Timer",
    "TimerError",
    "TimerMessageError",
    "is_long_deadline",
    "timer_delay",
]

#: The SQS ``DelaySeconds`` limit: a timer can wait at most this long.
MAX_DELAY_SECONDS: Final = 900


class TimerError(AsyaError):
    """A timer could not be sent; ``code`` is the AWS error code (or the botocore error class name)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class TimerMessageError(AsyaError, ValueError):
    """A timer message body is not ``{"id": <string>, "deadline_at": <timestamp>}``."""


@dataclass(frozen=True, slots=True)
class Timer:
    """One deadline timer: the task and the deadline it was armed for (the stored text, compared verbatim)."""

    task_id: str
    deadline_at: str

    @property
    def deadline(self) -> datetime:
        moment = parse_ts(self.deadline_at)
        if moment is None:  # from_body and DeadlineTimers.arm never build one
            raise TimerMessageError(f"deadline_at must be a timestamp, got {self.deadline_at!r}")
        return moment

    def to_body(self) -> str:
        return json.dumps({"id": self.task_id, "deadline_at": self.deadline_at}, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> Timer:
        """Parse a message body; :class:`TimerMessageError` names the bad field and value."""
        try:
            parsed: Any = json.loads(body)
        except (ValueError, RecursionError):
            raise TimerMessageError(f"timer body is not JSON: {body[:200]!r}") from None
        if not isinstance(parsed, Mapping):
            raise TimerMessageError(f"timer body must be a JSON object, got {body[:200]!r}")
        task_id, deadline_at = parsed.get("id"), parsed.get("deadline_at")
        if not isinstance(task_id, str) or not task_id:
            raise TimerMessageError(f"timer field id must be a non-empty string, got {task_id!r}")
        if not isinstance(deadline_at, str) or parse_ts(deadline_at) is None:
            raise TimerMessageError(f"timer field deadline_at must be a timestamp, got {deadline_at!r}")
        return cls(task_id=task_id, deadline_at=deadline_at)


def is_long_deadline(deadline: datetime, now: datetime) -> bool:
    """Whether a deadline is left to the ``long_deadlines`` sweep rather than a timer (GW-BACK-1)."""
    return (deadline - now).total_seconds() > LONG_DEADLINE_SECONDS


def timer_delay(deadline: datetime, now: datetime) -> int:
    """``DelaySeconds`` for a timer due at ``deadline``: whole seconds up (a timer never comes due before its
    deadline unless the delay was capped), within 0..900."""
    return min(MAX_DELAY_SECONDS, max(0, math.ceil((deadline - now).total_seconds())))


class DeadlineTimers:
    """Sends deadline timers to ``asya-{namespace}-x-deadline``. The SQS client is created on first use when not
    injected; ``account_id`` lets the queue URL be built without ``GetQueueUrl``."""

    def __init__(
        self,
        *,
        namespace: str,
        sqs: SQSClient | None = None,
        account_id: str | None = None,
        clock: Clock = system_clock,
        budget: ClientBudget = GATEWAY_BUDGET,
    ) -> None:
        self._queue_name = naming.queue_name(namespace, naming.DEADLINE)
        self._sqs = sqs
        self._budget = budget
        self._account_id = account_id or None
        self._clock = clock
        self._url: str | None = None

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            self._sqs = aws_client("sqs", self._budget)
        return self._sqs

    @property
    def queue_name(self) -> str:
        return self._queue_name

    def queue_url(self) -> str:
        """The timer queue's URL, cached. Raises :class:`TimerError` when it has to be looked up and cannot be."""
        if self._url is None:
            if self._account_id is not None:
                endpoint = str(self.sqs.meta.endpoint_url).rstrip("/")
                self._url = f"{endpoint}/{self._account_id}/{self._queue_name}"
            else:
                try:
                    self._url = self.sqs.get_queue_url(QueueName=self._queue_name)["QueueUrl"]
                except (ClientError, BotoCoreError) as exc:
                    raise _timer_error(f"cannot find the timer queue {self._queue_name}", exc) from exc
        return self._url

    def arm(self, task_id: str, deadline_at: str) -> bool:
        """Arm the timer of a deadline just set (create, resume): True when a timer was sent, False when the deadline
        is more than ``LONG_DEADLINE_SECONDS`` away (the ``long_deadlines`` sweep finds it). Raises
        :class:`TimerMessageError` for a ``deadline_at`` that is not a timestamp, :class:`TimerError` when the send
        fails."""
        timer = Timer(task_id=task_id, deadline_at=deadline_at)
        deadline, now = timer.deadline, self._clock()
        if is_long_deadline(deadline, now):
            return False
        self.send(timer, delay_seconds=timer_delay(deadline, now))
        return True

    def rearm(self, timer: Timer) -> int:
        """Send ``timer`` again for a deadline still ahead (a timer that came due early); the delay it got."""
        delay = max(1, timer_delay(timer.deadline, self._clock()))
        self.send(timer, delay_seconds=delay)
        return delay

    def send(self, timer: Timer, *, delay_seconds: int) -> None:
        """One ``SendMessage`` with the given delay (0..900). Raises :class:`TimerError`."""
        if not 0 <= delay_seconds <= MAX_DELAY_SECONDS:
            raise ValueError(f"delay_seconds must be 0..{MAX_DELAY_SECONDS}, got {delay_seconds!r}")
        url = self.queue_url()
        try:
            self.sqs.send_message(QueueUrl=url, MessageBody=timer.to_body(), DelaySeconds=delay_seconds)
        except (ClientError, BotoCoreError) as exc:
            raise _timer_error(f"deadline timer of task {timer.task_id} not sent to {self._queue_name}", exc) from exc


def _timer_error(message: str, exc: ClientError | BotoCoreError) -> TimerError:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code") or "ClientError")
    else:
        code = type(exc).__name__
    return TimerError(f"{message}: {code}", code=code)
