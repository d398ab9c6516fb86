"""The one shape of the mesh's threshold alarms: above a threshold in ``minutes`` of the last ``of_minutes``
periods, missing data not breaching (shared by :mod:`asya_cdk.operator_alarms`, :mod:`asya_cdk.limit_alarms` and
:mod:`asya_cdk.observability`)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

__all__ = ["threshold_alarm"]


def threshold_alarm(
    scope: Construct,
    id: str,
    *,
    description: str,
    metric: cloudwatch.IMetric,
    minutes: int,
    of_minutes: int,
    threshold: float = 0,
) -> cloudwatch.Alarm:
    """An alarm raised when ``metric`` is above ``threshold`` in ``minutes`` of the last ``of_minutes`` periods.
    Missing data is not breaching: an idle mesh publishes no datapoints for an empty queue or an unused function."""
    return cloudwatch.Alarm(
        scope,
        id,
        alarm_description=description,
        metric=metric,
        threshold=threshold,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=of_minutes,
        datapoints_to_alarm=minutes,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
