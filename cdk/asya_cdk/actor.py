"""One deployed actor: its queue, dead-letter queue, Lambda function, event source mapping and DLQ alarm.

Sizing follows P-MAN-4: the function timeout is ``DeployedActor.lambda_timeout`` and the queue's visibility timeout
``DeployedActor.visibility_timeout`` (the function timeout + 60 s). Names follow P-NAME-4: queue ``asya-{ns}-{actor}``,
DLQ ``asya-{ns}-{actor}-dlq``; both standard queues with a TLS-only policy. Encryption: SSE-SQS (the AWS-owned key, no
KMS charge) unless the mesh has a customer-managed key, then SSE-KMS with it. The source queue keeps messages
:data:`QUEUE_RETENTION` (7 days) and the DLQ :data:`DLQ_RETENTION` (14 days): SQS keeps a message's original enqueue
time when it moves it to the DLQ, so a DLQ that kept no longer than its source would drop failures on arrival.

The event source mapping always reports partial batch failures (P-ACK-1) and caps its pollers at the manifest's
``max_concurrency`` (``ScalingConfig.MaximumConcurrency``); the function reserves the manifest's
``reserved_concurrency``, if any; after ``max_receive_count`` receives SQS
moves a message to the DLQ (P-ACK-6), whose depth above zero raises ``DlqAlarm``; a queue whose oldest message is
older than :data:`AGE_ALARM_SECONDS` for 5 minutes raises ``AgeAlarm`` (the actor is failing, throttled or capped
by ``max_concurrency``). Crew actors (x-sink, x-sump) have no
batching window: a record is checkpointed as soon as it arrives (P-CKPT-1).

Recursive loops: the function's ``recursive_loop`` is ``Allow``. The layer re-sends to the actor's own queue by design
(retries, routes that visit an actor twice), and botocore propagates the trace header even with tracing off, so
Lambda's loop detection would stop such a task after 16 invocations and drop the message silently. Runaway tasks are
bounded by their deadline instead (docs/deploy.md, "Recursive loops").

``overrides`` carries the caller's ``xxx_props`` of :class:`~asya_cdk.mesh.AsyaMesh`, already checked against the
fields the mesh owns; they are applied over the defaults here and under the owned fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from asya import naming
from asya.manifest import DeployedActor
from asya_cdk.errors import DeploymentError
from asya_cdk.nag import acknowledge

__all__ = [
    "AGE_ALARM_SECONDS",
    "DLQ_RETENTION",
    "QUEUE_RETENTION",
    "Actor",
    "ActorOverrides",
    "dlq_alarm",
    "function_props",
    "queue_encryption",
    "retention_problems",
]

#: Source queue retention (chosen): a week of backlog; the DLQ keeps failures longer (module docstring).
QUEUE_RETENTION: Final = Duration.days(7)
#: DLQ retention: the SQS maximum.
DLQ_RETENTION: Final = Duration.days(14)
#: The age of the oldest message that raises ``AgeAlarm`` (chosen): a quarter of an hour behind for 5 minutes.
AGE_ALARM_SECONDS: Final = 900
_AGE_ALARM_MINUTES: Final = 5


@dataclass(frozen=True, slots=True)
class ActorOverrides:
    """The caller's extra props (keyword arguments of the L2 constructs), fields the mesh owns already removed."""

    queue: Mapping[str, Any] = field(default_factory=dict)
    dead_letter_queue: Mapping[str, Any] = field(default_factory=dict)
    event_source: Mapping[str, Any] = field(default_factory=dict)
    function: Mapping[str, Any] = field(default_factory=dict)
    log_group: Mapping[str, Any] = field(default_factory=dict)


def queue_encryption(key: kms.IKey | None) -> dict[str, Any]:
    """Queue props of the mesh's encryption: SSE-SQS, or SSE-KMS with the customer-managed ``key``."""
    if key is None:
        return {"encryption": sqs.QueueEncryption.SQS_MANAGED}
    # the data key is reused for 5 minutes (the default), bounding KMS requests to one per queue and 5 minutes
    return {"encryption": sqs.QueueEncryption.KMS, "encryption_master_key": key}


def retention_problems(queue: Mapping[str, Any], dead_letter_queue: Mapping[str, Any]) -> list[str]:
    """A DLQ must keep messages longer than its source queue: SQS keeps a message's original enqueue time when it
    moves it to the DLQ, so a DLQ keeping them no longer would drop failures on arrival. ``queue`` and
    ``dead_letter_queue`` are the caller's ``queue_props`` / ``dead_letter_queue_props`` fields."""
    source: Duration = queue.get("retention_period", QUEUE_RETENTION)
    dlq: Duration = dead_letter_queue.get("retention_period", DLQ_RETENTION)
    if dlq.to_seconds() > source.to_seconds():
        return []
    return [
        f"dead_letter_queue_props.retention_period: {_days(dlq)} is not longer than the source queue's "
        f"retention_period {_days(source)} (queue_props.retention_period, default {_days(QUEUE_RETENTION)}); SQS "
        "counts a DLQ message's age from its first enqueue, so make the DLQ's longer (at most 14 days)"
    ]


def _days(duration: Duration) -> str:
    seconds = duration.to_seconds()
    return f"{seconds / 86400:g} days" if seconds % 3600 == 0 else f"{seconds:g} s"


def function_props(
    *,
    description: str,
    overrides: Mapping[str, Any],
    runtime: lambda_.Runtime,
    handler: str,
    code: lambda_.Code,
    layers: Sequence[lambda_.ILayerVersion],
    memory_size: int,
    timeout: Duration,
    environment: Mapping[str, str],
    log_group: logs.ILogGroup,
    **owned: Any,
) -> dict[str, Any]:
    """Keyword arguments of a queue-fed mesh function (actors, the backstop), in the three tiers of
    ``asya_cdk.props``: the defaults (``description``, ARM64), the caller's ``overrides``, then the fields the mesh
    owns, ``owned`` last. The caller's ``layers`` come after the mesh's, never instead of them."""
    return {
        "description": description,
        "architecture": lambda_.Architecture.ARM_64,
        **overrides,
        "runtime": runtime,
        "handler": handler,
        "code": code,
        "layers": [*layers, *overrides.get("layers", ())],
        "memory_size": memory_size,
        "timeout": timeout,
        "environment": dict(environment),
        "log_group": log_group,
        **owned,
    }


def dlq_alarm(scope: Construct, id: str, dlq: sqs.IQueue, description: str) -> cloudwatch.Alarm:
    """The alarm raised by any message in ``dlq`` (a minute's maximum of visible messages above zero)."""
    return cloudwatch.Alarm(
        scope,
        id,
        alarm_description=description,
        metric=dlq.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(1), statistic=cloudwatch.Stats.MAXIMUM
        ),
        threshold=0,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )


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
        key: kms.IKey | None = None,
        overrides: ActorOverrides | None = None,
    ) -> None:
        _validate(namespace, actor, handler)
        super().__init__(scope, id)
        extra = overrides or ActorOverrides()
        self._actor = actor
        self._dlq = sqs.Queue(
            self,
            "Dlq",
            **{
                "retention_period": DLQ_RETENTION,
                **extra.dead_letter_queue,
                "queue_name": naming.dlq_name(namespace, actor.name),
                "enforce_ssl": True,
                **queue_encryption(key),
            },
        )
        self._queue = sqs.Queue(
            self,
            "Queue",
            **{
                "retention_period": QUEUE_RETENTION,
                **extra.queue,
                "queue_name": naming.queue_name(namespace, actor.name),
                "visibility_timeout": Duration.seconds(actor.visibility_timeout),
                "enforce_ssl": True,
                "dead_letter_queue": sqs.DeadLetterQueue(queue=self._dlq, max_receive_count=actor.max_receive_count),
                **queue_encryption(key),
            },
        )
        self._log_group = logs.LogGroup(self, "Logs", **{**extra.log_group, "retention": log_retention})
        self._function = lambda_.Function(
            self,
            "Function",
            **function_props(
                description=f"asya actor {actor.name} (namespace {namespace})",
                overrides=extra.function,
                runtime=runtime,
                handler=handler,
                code=code,
                layers=layers,
                memory_size=actor.memory,
                timeout=Duration.seconds(actor.lambda_timeout),
                environment=environment,
                log_group=self._log_group,
                # X-Ray (P-TRACE-3): CDK adds xray:PutTraceSegments/PutTelemetryRecords to the role; off: nothing
                tracing=lambda_.Tracing.ACTIVE if actor.tracing else None,
                recursive_loop=lambda_.RecursiveLoop.ALLOW,
                # the manifest's reserved_concurrency; the mesh's sum is checked by asya_cdk.concurrency
                reserved_concurrent_executions=actor.reserved_concurrency,
            ),
        )
        if actor.tracing:
            acknowledge(
                self,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments and xray:PutTelemetryRecords have no resource-level permissions; they only "
                "write this function's trace data (tracing: true in the manifest).",
            )
        owned: dict[str, Any] = {
            "batch_size": actor.batch_size,
            "report_batch_item_failures": True,
            "max_concurrency": actor.max_concurrency,
        }
        if actor.crew:
            owned["max_batching_window"] = Duration.seconds(0)
        self._event_source = event_sources.SqsEventSource(self._queue, **{**extra.event_source, **owned})
        self._function.add_event_source(self._event_source)
        self._dlq_alarm = dlq_alarm(
            self,
            "DlqAlarm",
            self._dlq,
            f"Messages in {naming.dlq_name(namespace, actor.name)}: envelopes of actor {actor.name} failed "
            f"{actor.max_receive_count} deliveries (P-ACK-6); inspect and redrive them.",
        )

        self._age_alarm = cloudwatch.Alarm(
            self,
            "AgeAlarm",
            alarm_description=(
                f"The oldest message in {naming.queue_name(namespace, actor.name)} is over {AGE_ALARM_SECONDS} s old: "
                f"actor {actor.name} is failing, throttled or capped by max_concurrency."
            ),
            metric=self._queue.metric_approximate_age_of_oldest_message(
                period=Duration.minutes(1), statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=AGE_ALARM_SECONDS,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=_AGE_ALARM_MINUTES,
            datapoints_to_alarm=_AGE_ALARM_MINUTES,
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

    @property
    def age_alarm(self) -> cloudwatch.Alarm:
        return self._age_alarm


def _validate(namespace: str, actor: DeployedActor, handler: str) -> None:
    field = f"actors.{actor.name}"
    try:
        naming.validate_namespace(namespace)
        naming.validate_actor_name(actor.name, field=field)
        naming.dlq_name(namespace, actor.name)
    except ValueError as exc:
        raise DeploymentError(str(exc)) from None
    if not 1 <= actor.batch_size <= 10:
        raise DeploymentError(f"{field}.batch_size: {actor.batch_size!r} is outside 1..10")
    if actor.visibility_timeout < actor.lambda_timeout:
        raise DeploymentError(
            f"{field}: visibility timeout {actor.visibility_timeout}s is shorter than the Lambda timeout "
            f"{actor.lambda_timeout}s; lower the actor's timeout or batch_size"
        )
    if not handler or "." not in handler:
        raise DeploymentError(f"{field}: Lambda handler must be 'module.function', got {handler!r}")
