"""Mesh-level alarms on the limits the mesh meets under load (docs/deploy.md, "Alarms"; docs/http.md GW-OVL-*).

Each is one alarm for the whole mesh, never one per actor (a stack's default placement holds 36 actors):

- ``OverloadAnswers``: requests answered 429 or 503 (API Gateway's stage throttle and Gateway Responses, and the
  gateway's own overload answers, GW-OVL-2/6), counted by a metric filter on the API's access log, which records
  every answer; metric ``OverloadAnswers-{namespace}`` in namespace ``Asya``.
- ``IndexThrottles``: read and write throttle events of the task table's global secondary indexes (DynamoDB reports
  them with the ``GlobalSecondaryIndexName`` dimension, apart from the table's own). A throttled index also holds
  back the table writes that feed it.
- ``TasksTimedOut``: the backstop's EMF metric (GW-BACK-6): tasks failed by their deadline.
- ``FailedRecords``: records handed back to SQS in partial batch responses, the layer's and crew's EMF metric
  (``asya.batchmetrics``), which Lambda's ``Errors`` never counts.
- ``AccountConcurrency``: Lambda's account-wide ``ClaimedAccountConcurrency`` (executions running unreserved plus
  every reservation: what on-demand invocations cannot have) at or above :data:`ACCOUNT_CONCURRENCY_SHARE` of the
  account's quota (``deployment.quotas.lambda_concurrency``, else ``deployment.account_concurrency``): the shared
  pool is about to throttle every function without a reservation. Its threshold is a maximum, not a sum.

All are raised when their value is above :data:`LIMIT_ALARM_THRESHOLDS` in 3 of the last 5 minutes; missing data is
not breaching.

:data:`LIMIT_WATCH` says, for every kind of limit the capacity model names (``asya.capacity.LIMIT_KINDS``), which
alarm of the mesh fires when the mesh reaches it (mesh-level ones here; ``FunctionAlarm``, ``AgeAlarm`` and
``TableThrottles`` of the actors and :mod:`asya_cdk.operator_alarms`), or that AWS publishes no metric for it.
docs/deploy.md's alarm table says what each alarm means and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from constructs import Construct

from asya import naming, tableschema
from asya.batchmetrics import FAILED_RECORDS_METRIC, METRICS_NAMESPACE
from asya_cdk.alarmshape import threshold_alarm
from asya_cdk.gateway import Gateway

__all__ = ["ACCOUNT_CONCURRENCY_SHARE", "LIMIT_ALARM_THRESHOLDS", "LIMIT_WATCH", "LimitAlarms", "Watch"]

#: Per-minute sums above which an alarm counts a minute as breaching (chosen: overload answers and failed records
#: come in bursts a healthy mesh also sees now and then; a throttled index or a timed-out task is worth a look).
LIMIT_ALARM_THRESHOLDS: Final = {"OverloadAnswers": 10, "IndexThrottles": 0, "TasksTimedOut": 0, "FailedRecords": 10}
#: The share of the account's concurrency quota claimed that raises ``AccountConcurrency`` (chosen: a margin before the
#: pool is exhausted, which Lambda answers with throttles).
ACCOUNT_CONCURRENCY_SHARE: Final = 0.9
_MINUTES: Final = 3
_OF_MINUTES: Final = 5
_PERIOD: Final = Duration.minutes(1)


@dataclass(frozen=True)
class Watch:
    """How the operator learns that the mesh reached one kind of limit: ``alarm`` is the construct id of the alarm that
    fires (``None``: AWS publishes no metric for the limit), ``meaning`` says what shows and why."""

    alarm: str | None
    meaning: str


#: Every kind of limit of the capacity model (``asya.capacity.LIMIT_KINDS``) and what watches it.
LIMIT_WATCH: Final[Mapping[str, Watch]] = {
    "stage_throttle": Watch("OverloadAnswers", "API Gateway answers the stage's excess with 429"),
    "apigw_account": Watch("OverloadAnswers", "API Gateway answers 429 across the account's APIs"),
    "lambda_pool": Watch("AccountConcurrency", "claimed account concurrency near the account's quota"),
    "reserved": Watch("FunctionAlarm", "Throttles of the function whose reservation is used up"),
    "event_source": Watch(
        "AgeAlarm",
        "the actor's queue backs up while its event source runs at MaximumConcurrency (the function's "
        "ConcurrentExecutions equals the cap, a different threshold per actor, so the queue's age is alarmed)",
    ),
    "sqs_inflight": Watch("AgeAlarm", "ReceiveMessage answers OverLimit, the event source stops, the queue ages"),
    "table_wru": Watch("TableThrottles", "WriteThrottleEvents on the table"),
    "table_rru": Watch("TableThrottles", "ReadThrottleEvents on the table"),
    "new_table_wru": Watch("TableThrottles", "WriteThrottleEvents in a new table's first burst"),
    "new_table_rru": Watch("TableThrottles", "ReadThrottleEvents in a new table's first burst"),
    "index_wru": Watch("IndexThrottles", "WriteThrottleEvents with the index's GlobalSecondaryIndexName"),
    "created_shard": Watch("IndexThrottles", "WriteThrottleEvents on by_created (one hot shard)"),
    "outcome_shard": Watch("IndexThrottles", "WriteThrottleEvents on by_outcome (one hot shard)"),
    "s3_prefix": Watch(
        None,
        "no metric: S3 reports requests per prefix only with paid request metrics; a 503 SlowDown the SDK's "
        "retries do not absorb fails its record and shows in FailedRecords",
    ),
    "kms": Watch(
        "FailedRecords",
        "ThrottlingException from KMS fails the actors' sends and checkpoint PUTs (FailedRecords) and the "
        "gateway's creates (OverloadAnswers)",
    ),
}


class LimitAlarms(Construct):
    """The mesh-level limit alarms of one mesh (module docstring); ``account_concurrency``: the account's Lambda
    concurrency quota."""

    def __init__(
        self, scope: Construct, id: str, *, namespace: str, gateway: Gateway, account_concurrency: int
    ) -> None:
        super().__init__(scope, id)
        overload_metric = f"OverloadAnswers-{namespace}"
        logs.MetricFilter(
            self,
            "OverloadAnswersFilter",
            log_group=gateway.access_log_group,
            metric_namespace=METRICS_NAMESPACE,
            metric_name=overload_metric,
            filter_pattern=logs.FilterPattern.any(
                logs.FilterPattern.string_value("$.status", "=", "429"),
                logs.FilterPattern.string_value("$.status", "=", "503"),
            ),
            metric_value="1",
        )
        table = naming.table_name(namespace)
        index_metrics: dict[str, cloudwatch.IMetric] = {}
        for n, gsi in enumerate(tableschema.GSIS):
            for kind in ("Read", "Write"):
                index_metrics[f"{kind.lower()}{n}"] = cloudwatch.Metric(
                    namespace="AWS/DynamoDB",
                    metric_name=f"{kind}ThrottleEvents",
                    dimensions_map={"TableName": table, "GlobalSecondaryIndexName": gsi.name},
                    statistic=cloudwatch.Stats.SUM,
                    period=_PERIOD,
                )
        emf = {"Namespace": namespace}
        metrics: dict[str, tuple[str, cloudwatch.IMetric]] = {
            "OverloadAnswers": (
                "Requests to the API answered 429 or 503 (GW-OVL-2, GW-OVL-6): AWS throttles the mesh or the stage "
                "throttle is reached. Read the gateway's WARNING lines 'the mesh is overloaded' for the service, "
                "then raise that quota (stage throttle, Lambda concurrency, table throughput).",
                cloudwatch.Metric(
                    namespace=METRICS_NAMESPACE, metric_name=overload_metric, statistic="Sum", period=_PERIOD
                ),
            ),
            "IndexThrottles": (
                f"DynamoDB throttled an index of {table} ({', '.join(g.name for g in tableschema.GSIS)}): a hot "
                "index partition (by_created takes every creation of a day) holds back the table's writes too. "
                "Spread creations over more shards or raise the table's throughput.",
                cloudwatch.MathExpression(
                    expression=" + ".join(f"FILL({name}, 0)" for name in index_metrics),
                    using_metrics=index_metrics,
                    label=f"{table} index throttle events",
                    period=_PERIOD,
                ),
            ),
            "TasksTimedOut": (
                "Tasks were failed by their deadline (GW-BACK-6): actors too slow or backed up, or throttled. "
                "Check the actors' AgeAlarm and FunctionAlarm and the tasks' history.",
                cloudwatch.Metric(
                    namespace=METRICS_NAMESPACE,
                    metric_name="TasksTimedOut",
                    dimensions_map=emf,
                    statistic="Sum",
                    period=_PERIOD,
                ),
            ),
            "FailedRecords": (
                "Records were handed back to SQS in partial batch responses (not Lambda errors): handler "
                "errors, throttled writes or sends, or hops held by another run. Read the actors' WARNING "
                "'record failed' lines; records past max_receive_count reach the DLQs.",
                cloudwatch.Metric(
                    namespace=METRICS_NAMESPACE,
                    metric_name=FAILED_RECORDS_METRIC,
                    dimensions_map=emf,
                    statistic="Sum",
                    period=_PERIOD,
                ),
            ),
        }
        metrics["AccountConcurrency"] = (
            f"Lambda's claimed account concurrency reached {ACCOUNT_CONCURRENCY_SHARE:.0%} of the account's quota of "
            f"{account_concurrency}: functions without a reservation are about to be throttled, queues back up and "
            "the gateway answers 503. Set max_concurrency on the busiest actors, or raise the quota (Service Quotas) "
            "and declare it in deployment.quotas.lambda_concurrency.",
            cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name="ClaimedAccountConcurrency",
                statistic=cloudwatch.Stats.MAXIMUM,
                period=_PERIOD,
            ),
        )
        thresholds = {
            **LIMIT_ALARM_THRESHOLDS,
            "AccountConcurrency": ACCOUNT_CONCURRENCY_SHARE * account_concurrency,
        }
        self._alarms = {
            name: threshold_alarm(
                self,
                name,
                description=f"{description} (asya mesh {namespace})",
                metric=metric,
                threshold=thresholds[name],
                minutes=_MINUTES,
                of_minutes=_OF_MINUTES,
            )
            for name, (description, metric) in metrics.items()
        }

    @property
    def alarms(self) -> Mapping[str, cloudwatch.Alarm]:
        """The alarms by name: ``OverloadAnswers``, ``IndexThrottles``, ``TasksTimedOut``, ``FailedRecords``,
        ``AccountConcurrency``."""
        return dict(self._alarms)
