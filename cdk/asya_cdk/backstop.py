"""The deadline backstop (GW-BACK-1): the timer queue ``asya-{ns}-x-deadline`` with its DLQ, and one
function that consumes it and sweeps the ``long_deadlines`` index.

- Timers: a deadline at most 900 s away is one SQS message with that delay on the timer queue
  (``asya.naming.DEADLINE``). The function consumes it through an SQS event source with batch size
  :data:`TIMER_BATCH_SIZE` and partial batch failure reports; a timer that fails :data:`TIMER_MAX_RECEIVE_COUNT`
  deliveries moves to the DLQ, whose alarm fires.
- Sweep: an EventBridge rule runs the same function every 60 s for the long deadlines (GW-BACK-1). The handler
  (``asya_gateway.backstop.lambda_handler``) tells the two event shapes apart.
- Concurrency (GW-BACK-7): ``reserved_concurrency`` reserves executions for the function, so a saturated account
  cannot throttle it; ``timer_concurrency`` caps the timer event source below that reservation, so the event source
  never throttles its own function and the sweep always has an execution left (``asya_cdk.concurrency``).

Its code is the gateway asset; its handler is a plain Lambda handler (no adapter). Queues are encrypted, the
function's props built and the DLQ alarmed like the actors' (``asya_cdk.actor``: :func:`queue_encryption`,
:func:`function_props`, :func:`dlq_alarm`); the caller's ``function_overrides``, ``queue_overrides`` and
``dead_letter_queue_overrides`` (``AsyaMesh``'s ``queue_props`` and ``dead_letter_queue_props``) apply to the function,
the timer queue and its DLQ as the actors' overrides do. ``tracing`` (the manifest's ``defaults.tracing``) turns on
X-Ray active tracing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from asya import naming
from asya.manifest import visibility_timeout
from asya_cdk.actor import DLQ_RETENTION, QUEUE_RETENTION, dlq_alarm, function_props, queue_encryption
from asya_cdk.errors import DeploymentError
from asya_cdk.nag import acknowledge

__all__ = ["BACKSTOP_INTERVAL", "BACKSTOP_TIMEOUT", "TIMER_BATCH_SIZE", "TIMER_MAX_RECEIVE_COUNT", "Backstop"]

#: GW-BACK-1.
BACKSTOP_INTERVAL: Final = Duration.minutes(1)
#: A sweep that outlives the interval would overlap the next one; concurrent runs are safe (GW-BACK-2).
BACKSTOP_TIMEOUT: Final = 55
TIMER_BATCH_SIZE: Final = 10
TIMER_MAX_RECEIVE_COUNT: Final = 5


class Backstop(Construct):
    """Timer queue + DLQ + function + SQS event source + schedule rule."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        namespace: str,
        handler: str,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        memory: int = 256,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        key: kms.IKey | None = None,
        function_overrides: Mapping[str, Any] | None = None,
        queue_overrides: Mapping[str, Any] | None = None,
        dead_letter_queue_overrides: Mapping[str, Any] | None = None,
        tracing: bool = False,
        reserved_concurrency: int | None = None,
        timer_concurrency: int | None = None,
    ) -> None:
        if not handler or "." not in handler:
            raise DeploymentError(f"backstop handler must be 'module.function', got {handler!r}")
        super().__init__(scope, id)
        self._timer_dlq = sqs.Queue(
            self,
            "TimerDlq",
            **{
                "retention_period": DLQ_RETENTION,
                **(dead_letter_queue_overrides or {}),
                "queue_name": naming.dlq_name(namespace, naming.DEADLINE),
                "enforce_ssl": True,
                **queue_encryption(key),
            },
        )
        self._timer_queue = sqs.Queue(
            self,
            "TimerQueue",
            **{
                "retention_period": QUEUE_RETENTION,
                **(queue_overrides or {}),
                "queue_name": naming.queue_name(namespace, naming.DEADLINE),
                # the function timeout plus the throttle retry window, as for actors (P-MAN-4)
                "visibility_timeout": Duration.seconds(visibility_timeout(BACKSTOP_TIMEOUT)),
                "enforce_ssl": True,
                "dead_letter_queue": sqs.DeadLetterQueue(
                    queue=self._timer_dlq, max_receive_count=TIMER_MAX_RECEIVE_COUNT
                ),
                **queue_encryption(key),
            },
        )
        self._log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self._function = lambda_.Function(
            self,
            "Function",
            **function_props(
                description="asya deadline backstop: timers and the long-deadline sweep (GW-BACK-1)",
                overrides=function_overrides or {},
                runtime=runtime,
                handler=handler,
                code=code,
                layers=layers,
                memory_size=memory,
                timeout=Duration.seconds(BACKSTOP_TIMEOUT),
                environment=environment,
                log_group=self._log_group,
                # A failed sweep is redone by the next scheduled run; Lambda's own async retries would only overlap it.
                retry_attempts=0,
                tracing=lambda_.Tracing.ACTIVE if tracing else None,
                reserved_concurrent_executions=reserved_concurrency,
            ),
        )
        if tracing:
            acknowledge(
                self,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments and xray:PutTelemetryRecords have no resource-level permissions; they only "
                "write the backstop's trace data (defaults.tracing: true in the manifest).",
            )
        self._event_source = event_sources.SqsEventSource(
            self._timer_queue,
            batch_size=TIMER_BATCH_SIZE,
            report_batch_item_failures=True,
            max_batching_window=Duration.seconds(0),
            max_concurrency=timer_concurrency,
        )
        self._function.add_event_source(self._event_source)
        self._rule = events.Rule(
            self,
            "Schedule",
            description="asya long-deadline sweep every 60 s (GW-BACK-1)",
            schedule=events.Schedule.rate(BACKSTOP_INTERVAL),
            targets=[targets.LambdaFunction(self._function, retry_attempts=0)],
        )
        self._timer_dlq_alarm = dlq_alarm(
            self,
            "TimerDlqAlarm",
            self._timer_dlq,
            f"Messages in {naming.dlq_name(namespace, naming.DEADLINE)}: deadline timers failed "
            f"{TIMER_MAX_RECEIVE_COUNT} deliveries; their tasks may not time out (GW-BACK-1).",
        )

    @property
    def function(self) -> lambda_.Function:
        return self._function

    @property
    def rule(self) -> events.Rule:
        return self._rule

    @property
    def timer_queue(self) -> sqs.Queue:
        return self._timer_queue

    @property
    def timer_dlq(self) -> sqs.Queue:
        return self._timer_dlq

    @property
    def timer_dlq_alarm(self) -> cloudwatch.Alarm:
        return self._timer_dlq_alarm
