"""One deployed actor: its queue, dead-letter queue, Lambda function, event source mapping and DLQ alarm.

Sizing follows P-MAN-4: the function timeout is ``DeployedActor.lambda_timeout`` and the queue's visibility timeout
``DeployedActor.visibility_timeout`` (6x). Names follow P-NAME-4: queue ``asya-{ns}-{actor}``, DLQ
``asya-{ns}-{actor}-dlq``; both standard queues with SQS-managed encryption and a TLS-only policy, keeping messages
14 days. The event source mapping always reports partial batch failures (P-ACK-1); after ``max_receive_count``
receives SQS moves a message to the DLQ (P-ACK-6), whose depth above zero raises the alarm. An actor whose manifest
``tracing`` is on gets X-Ray active tracing (and the X-Ray write permissions CDK adds with it, P-TRACE-3); the
environment, ``ASYA_TRACING`` included, comes from ``asya.environment``.

Grants on other resources (the mesh's queues, the table, the bucket) are the stack's business; this construct only
lets the function consume its own queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from asya import naming
from asya.manifest import DeployedActor
from asya_cdk.errors import DeploymentError
from asya_cdk.nag import acknowledge

__all__ = ["QUEUE_RETENTION", "Actor"]

#: Queue and DLQ message retention (P-ACK-6, chosen: the SQS maximum).
QUEUE_RETENTION = Duration.days(14)
_MAX_CONCURRENCY_RANGE = (2, 1000)


class Actor(Construct):
    """Queue + DLQ + function + event source mapping + DLQ alarm of one actor."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        namespace: str,
        actor: DeployedActor,
        code: lambda_.Code,
        handler: str,
        runtime: lambda_.Runtime,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        _validate(namespace, actor, handler)
        super().__init__(scope, id)
        self._actor = actor
        self._dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=naming.dlq_name(namespace, actor.name),
            retention_period=QUEUE_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self._queue = sqs.Queue(
            self,
            "Queue",
            queue_name=naming.queue_name(namespace, actor.name),
            visibility_timeout=Duration.seconds(actor.visibility_timeout),
            retention_period=QUEUE_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self._dlq, max_receive_count=actor.max_receive_count),
        )
        self._log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self._function = lambda_.Function(
            self,
            "Function",
            description=f"asya actor {actor.name} (namespace {namespace})",
            runtime=runtime,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=code,
            layers=list(layers),
            memory_size=actor.memory,
            timeout=Duration.seconds(actor.lambda_timeout),
            environment=dict(environment),
            log_group=self._log_group,
            # X-Ray (P-TRACE-3): CDK adds xray:PutTraceSegments/PutTelemetryRecords to the role; off: nothing
            tracing=lambda_.Tracing.ACTIVE if actor.tracing else None,
        )
        if actor.tracing:
            acknowledge(
                self,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments and xray:PutTelemetryRecords have no resource-level permissions; they only "
                "write this function's trace data (tracing: true in the manifest).",
            )
        self._event_source = event_sources.SqsEventSource(
            self._queue,
            batch_size=actor.batch_size,
            report_batch_item_failures=True,
            max_concurrency=actor.max_concurrency,
        )
        self._function.add_event_source(self._event_source)
        self._dlq_alarm = cloudwatch.Alarm(
            self,
            "DlqAlarm",
            alarm_description=(
                f"Messages in {naming.dlq_name(namespace, actor.name)}: envelopes of actor {actor.name} failed "
                f"{actor.max_receive_count} deliveries (P-ACK-6); inspect and redrive them."
            ),
            metric=self._dlq.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    @property
    def name(self) -> str:
        return self._actor.name

    @property
    def deployed(self) -> DeployedActor:
        return self._actor

    @property
    def queue(self) -> sqs.Queue:
        return self._queue

    @property
    def dlq(self) -> sqs.Queue:
        return self._dlq

    @property
    def function(self) -> lambda_.Function:
        return self._function

    @property
    def log_group(self) -> logs.LogGroup:
        return self._log_group

    @property
    def event_source(self) -> event_sources.SqsEventSource:
        return self._event_source

    @property
    def dlq_alarm(self) -> cloudwatch.Alarm:
        return self._dlq_alarm


def _validate(namespace: str, actor: DeployedActor, handler: str) -> None:
    field = f"actors.{actor.name}"
    try:
        naming.validate_namespace(namespace)
        naming.validate_actor_name(actor.name, field=field)
        naming.dlq_name(namespace, actor.name)
    except ValueError as exc:
        raise DeploymentError(str(exc)) from None
    low, high = _MAX_CONCURRENCY_RANGE
    if actor.max_concurrency is not None and not low <= actor.max_concurrency <= high:
        raise DeploymentError(
            f"{field}.max_concurrency: {actor.max_concurrency!r} is outside {low}..{high} (the SQS event source "
            "limit); remove it for no limit"
        )
    if not 1 <= actor.batch_size <= 10:
        raise DeploymentError(f"{field}.batch_size: {actor.batch_size!r} is outside 1..10")
    if actor.visibility_timeout < actor.lambda_timeout:
        raise DeploymentError(
            f"{field}: visibility timeout {actor.visibility_timeout}s is shorter than the Lambda timeout "
            f"{actor.lambda_timeout}s; lower the actor's timeout or batch_size"
        )
    if not handler or "." not in handler:
        raise DeploymentError(f"{field}: Lambda handler must be 'module.function', got {handler!r}")
