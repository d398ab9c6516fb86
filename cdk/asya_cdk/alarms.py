"""Mesh-wide CloudWatch alarms beyond the per-actor DLQ alarm of :class:`asya_cdk.actor.Actor` (P-ACK-6).

- ``SumpBacklog``: the x-sump queue holds visible messages (``ApproximateNumberOfMessagesVisible``, 1-minute
  maximum, > 0) in each of ``SUMP_BACKLOG_MINUTES`` consecutive minutes. x-sump drains its queue within seconds, so a
  backlog that lasts means x-sump is failing or a burst of infrastructure errors outruns it; single failed envelopes
  are counted by x-sump's ``FailedEnvelopes`` metric instead (P-SUMP-2) and do not raise this alarm.
- ``BackstopErrors``: the deadline backstop function failed (``Errors`` > 0) in each of ``BACKSTOP_ERROR_MINUTES``
  consecutive minutes: tasks past their deadline are then no longer timed out (GW-BACK-1, P-TIME-9).

Missing data is not breaching (an idle mesh publishes no SQS datapoints for an empty queue). The alarms have no
actions: ``AsyaStack.alarms`` exposes them so an app can ``add_alarm_action`` (an SNS topic, a pager).
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = ["BACKSTOP_ERROR_MINUTES", "SUMP_BACKLOG_MINUTES", "MeshAlarms"]

SUMP_BACKLOG_MINUTES: Final = 5
BACKSTOP_ERROR_MINUTES: Final = 3
_PERIOD: Final = Duration.minutes(1)


class MeshAlarms(Construct):
    """The x-sump backlog alarm and the backstop error alarm of one mesh."""

    def __init__(self, scope: Construct, id: str, *, sump_queue: sqs.IQueue, backstop: lambda_.IFunction) -> None:
        super().__init__(scope, id)
        self._sump_backlog = cloudwatch.Alarm(
            self,
            "SumpBacklog",
            alarm_description=(
                f"{sump_queue.queue_name} has had messages waiting for {SUMP_BACKLOG_MINUTES} minutes: x-sump is "
                "failing or overwhelmed; check its logs and its DLQ."
            ),
            metric=sump_queue.metric_approximate_number_of_messages_visible(
                period=_PERIOD, statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=SUMP_BACKLOG_MINUTES,
            datapoints_to_alarm=SUMP_BACKLOG_MINUTES,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self._backstop_errors = cloudwatch.Alarm(
            self,
            "BackstopErrors",
            alarm_description=(
                f"The deadline backstop failed {BACKSTOP_ERROR_MINUTES} runs in a row: overdue tasks are not being "
                "timed out (GW-BACK-2); check its logs."
            ),
            metric=backstop.metric_errors(period=_PERIOD, statistic=cloudwatch.Stats.SUM),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=BACKSTOP_ERROR_MINUTES,
            datapoints_to_alarm=BACKSTOP_ERROR_MINUTES,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    @property
    def sump_backlog(self) -> cloudwatch.Alarm:
        return self._sump_backlog

    @property
    def backstop_errors(self) -> cloudwatch.Alarm:
        return self._backstop_errors
