"""Alarms, their optional SNS topic and the CloudWatch dashboard of one mesh.

Alarms (missing data is not breaching: an idle mesh publishes no SQS datapoints for an empty queue):

- each actor's ``DlqAlarm`` and ``AgeAlarm`` (:class:`asya_cdk.actor.Actor`) and the timer DLQ's alarm
  (:class:`asya_cdk.backstop.Backstop`);
- ``SumpBacklog``: the x-sump queue holds visible messages in each of ``SUMP_BACKLOG_MINUTES`` consecutive minutes.
  x-sump drains its queue within seconds, so a backlog that lasts means x-sump is failing or overwhelmed;
- ``BackstopErrors``: the deadline backstop failed in each of ``BACKSTOP_ERROR_MINUTES`` consecutive minutes.

The operator's alarms (:mod:`asya_cdk.operator_alarms`): each function's errors and throttles, the
API's 5xx rate, the table's throttles and the timer queue's oldest message. They live in the nested stack
``OperatorAlarms`` under ``placement: stack`` (the mesh's own stack has no room for one more resource per actor) and
in the mesh's stack under ``placement: nested``, where each actor's function alarm goes into the actor's nested stack.

With ``observability.alarm_topic_arn`` in the manifest, every alarm of the mesh notifies that topic (alarm and OK).

Dashboards (``observability.dashboard``, default on): ``asya-{namespace}-{region}`` (dashboard names are
account-global, so the region keeps one namespace in two regions apart) with a mesh row (task outcomes and x-sump
failures by actor and reason from the EMF metrics through ``SEARCH`` expressions, the gateway's and the backstop's
errors), then one row per actor: queue depth, age of the oldest message and DLQ depth; errors, throttles and
duration (p50, p99). CloudWatch allows 500 widgets per dashboard and a bounded body, so the actors are split
:data:`ACTORS_PER_DASHBOARD` per dashboard (2 widgets each): ``asya-{namespace}-{region}-2``, ``-3``, ... hold the
next ones, in manifest order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from aws_cdk import Duration, NestedStack, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from asya import naming
from asya_cdk.actor import Actor
from asya_cdk.backstop import Backstop
from asya_cdk.gateway import Gateway
from asya_cdk.operator_alarms import OperatorAlarms, threshold_alarm

__all__ = [
    "ACTORS_PER_DASHBOARD",
    "BACKSTOP_ERROR_MINUTES",
    "METRICS_NAMESPACE",
    "SUMP_BACKLOG_MINUTES",
    "MeshObservability",
    "retention_days",
]

SUMP_BACKLOG_MINUTES: Final = 5
BACKSTOP_ERROR_MINUTES: Final = 3
#: The EMF namespace of the runtime's metrics (``asya_deploy.environment.POWERTOOLS_ENV``).
METRICS_NAMESPACE: Final = "Asya"
#: Actors per dashboard (chosen): 81 widgets and a body near 100 KB, far under CloudWatch's 500 widgets.
ACTORS_PER_DASHBOARD: Final = 40
_PERIOD: Final = Duration.minutes(1)
_WIDTH: Final = 12
_HEIGHT: Final = 6


class MeshObservability(Construct):
    """The mesh-wide alarms, the SNS actions of every alarm, and the dashboard."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        namespace: str,
        actors: Sequence[Actor],
        backstop: Backstop,
        gateway: Gateway,
        alarm_topic_arn: str | None = None,
        dashboard: bool = True,
    ) -> None:
        super().__init__(scope, id)
        mesh_stack = Stack.of(self)
        alarm_scope: Construct = self
        if any(Stack.of(actor) is mesh_stack for actor in actors):
            alarm_scope = NestedStack(self, "OperatorAlarms", description=f"asya mesh {namespace}: operator alarms")
        self._operator = OperatorAlarms(
            alarm_scope,
            "Operator",
            namespace=namespace,
            actors=actors,
            backstop=backstop,
            gateway=gateway,
            actor_alarms_with_actors=alarm_scope is self,
        )
        self._sump_backlog = threshold_alarm(
            self,
            "SumpBacklog",
            description=(
                f"{naming.queue_name(namespace, naming.SUMP)} has had messages waiting for {SUMP_BACKLOG_MINUTES} "
                "minutes: x-sump is failing or overwhelmed; check its logs and its DLQ."
            ),
            metric=_queue_metric("ApproximateNumberOfMessagesVisible", naming.queue_name(namespace, naming.SUMP)),
            minutes=SUMP_BACKLOG_MINUTES,
            of_minutes=SUMP_BACKLOG_MINUTES,
        )
        self._backstop_errors = threshold_alarm(
            self,
            "BackstopErrors",
            description=(
                f"The deadline backstop failed {BACKSTOP_ERROR_MINUTES} runs in a row: overdue tasks are not being "
                "timed out (GW-BACK-2); check its logs."
            ),
            metric=backstop.function.metric_errors(period=_PERIOD, statistic=cloudwatch.Stats.SUM),
            minutes=BACKSTOP_ERROR_MINUTES,
            of_minutes=BACKSTOP_ERROR_MINUTES,
        )
        self._topic: sns.ITopic | None = None
        if alarm_topic_arn is not None:
            self._topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            action = cw_actions.SnsAction(self._topic)
            alarms = [self._sump_backlog, self._backstop_errors, backstop.timer_dlq_alarm]
            alarms += [alarm for actor in actors for alarm in (actor.dlq_alarm, actor.age_alarm)]
            alarms += self._operator.alarms
            for alarm in alarms:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)
        self._dashboards: list[cloudwatch.Dashboard] = []
        if dashboard:
            chunks = [actors[i : i + ACTORS_PER_DASHBOARD] for i in range(0, len(actors), ACTORS_PER_DASHBOARD)]
            name = f"asya-{namespace}-{Stack.of(self).region}"
            for number, chunk in enumerate(chunks or [[]]):
                # the first keeps the id (and so the logical id) of the single dashboard of earlier versions
                board = cloudwatch.Dashboard(
                    self,
                    "Dashboard" if number == 0 else f"Dashboard{number + 1}",
                    dashboard_name=name if number == 0 else f"{name}-{number + 1}",
                    default_interval=Duration.hours(3),
                )
                if number == 0:
                    self._mesh_row(board, namespace, backstop, gateway)
                else:
                    board.add_widgets(
                        cloudwatch.TextWidget(
                            markdown=f"# asya mesh `{namespace}`, actors part {number + 1} of {len(chunks)}",
                            width=24,
                            height=1,
                        )
                    )
                self._actor_rows(board, namespace, chunk)
                self._dashboards.append(board)

    def _mesh_row(self, board: cloudwatch.Dashboard, namespace: str, backstop: Backstop, gateway: Gateway) -> None:
        task_metrics = cloudwatch.MathExpression(
            expression=(f"SEARCH('{{{METRICS_NAMESPACE},Namespace}} Namespace=\"{namespace}\"', 'Sum', 300)"),
            label="",
            period=Duration.minutes(5),
        )
        sump_reasons = cloudwatch.MathExpression(
            expression=(
                f'SEARCH(\'{{{METRICS_NAMESPACE},Actor,Namespace,Reason}} MetricName="FailedEnvelopes" '
                f"Namespace=\"{namespace}\"', 'Sum', 300)"
            ),
            label="",
            period=Duration.minutes(5),
        )
        board.add_widgets(
            cloudwatch.TextWidget(markdown=f"# asya mesh `{namespace}`", width=24, height=1),
            cloudwatch.GraphWidget(title="Task outcomes (EMF)", left=[task_metrics], width=8, height=_HEIGHT),
            cloudwatch.GraphWidget(
                title="x-sump failures by actor and reason (EMF)", left=[sump_reasons], width=8, height=_HEIGHT
            ),
            cloudwatch.GraphWidget(
                title="Gateway and backstop errors",
                left=[
                    gateway.function.metric_errors(label="gateway", period=_PERIOD),
                    backstop.function.metric_errors(label="backstop", period=_PERIOD),
                ],
                width=8,
                height=_HEIGHT,
            ),
        )

    def _actor_rows(self, board: cloudwatch.Dashboard, namespace: str, actors: Sequence[Actor]) -> None:
        for actor in actors:
            queue = naming.queue_name(namespace, actor.name)
            dlq = naming.dlq_name(namespace, actor.name)
            board.add_widgets(
                cloudwatch.GraphWidget(
                    title=f"{actor.name}: queue",
                    left=[
                        _queue_metric("ApproximateNumberOfMessagesVisible", queue, label="depth"),
                        _queue_metric("ApproximateNumberOfMessagesVisible", dlq, label="DLQ depth"),
                    ],
                    right=[_queue_metric("ApproximateAgeOfOldestMessage", queue, label="oldest (s)")],
                    width=_WIDTH,
                    height=_HEIGHT,
                ),
                cloudwatch.GraphWidget(
                    title=f"{actor.name}: function",
                    left=[
                        actor.function.metric_errors(label="errors", period=_PERIOD),
                        actor.function.metric_throttles(label="throttles", period=_PERIOD),
                    ],
                    right=[
                        actor.function.metric_duration(label="p50 ms", statistic="p50", period=_PERIOD),
                        actor.function.metric_duration(label="p99 ms", statistic="p99", period=_PERIOD),
                    ],
                    width=_WIDTH,
                    height=_HEIGHT,
                ),
            )

    @property
    def sump_backlog(self) -> cloudwatch.Alarm:
        return self._sump_backlog

    @property
    def backstop_errors(self) -> cloudwatch.Alarm:
        return self._backstop_errors

    @property
    def operator(self) -> OperatorAlarms:
        """Errors and throttles per function, the API's 5xx rate, table throttles, the timer queue's age."""
        return self._operator

    @property
    def alarm_topic(self) -> sns.ITopic | None:
        """The manifest's ``observability.alarm_topic_arn``, imported; ``None`` when unset."""
        return self._topic

    @property
    def dashboard(self) -> cloudwatch.Dashboard | None:
        """The first dashboard (the mesh row and the first actors); ``None`` with ``observability.dashboard: false``."""
        return self._dashboards[0] if self._dashboards else None

    @property
    def dashboards(self) -> Sequence[cloudwatch.Dashboard]:
        """Every dashboard of the mesh, in order."""
        return tuple(self._dashboards)


def _queue_metric(name: str, queue: str, *, label: str | None = None) -> cloudwatch.Metric:
    # built from the queue's name (P-NAME-4), not its construct: no reference into an actors' nested stack
    return cloudwatch.Metric(
        namespace="AWS/SQS",
        metric_name=name,
        dimensions_map={"QueueName": queue},
        statistic=cloudwatch.Stats.MAXIMUM,
        period=_PERIOD,
        label=label,
    )


def retention_days(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention of ``days`` (one of ``asya.manifest.blocks.LOG_RETENTION_DAYS``)."""
    return logs.RetentionDays[_RETENTION[days]]


_RETENTION: Final[Mapping[int, str]] = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
}
