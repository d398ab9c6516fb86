"""The operator's alarms of one mesh (docs/deploy.md, "Alarms"), besides the DLQ, age, x-sump and
backstop alarms of :mod:`asya_cdk.observability`:

- ``FunctionAlarm`` per function (every actor, crew included, the gateway's two functions and the backstop): Lambda
  ``Errors`` plus ``Throttles`` above zero in :data:`FUNCTION_ALARM_MINUTES` of :data:`EVALUATION_MINUTES` minutes.
  One alarm per function, not two, so an actor costs one resource more, not two (500 resources per stack).
- ``ApiServerErrors``: the REST API's ``5XXError`` average (the share of requests answered 5xx, the gateway's own
  failures included) above :data:`API_5XX_RATE` in :data:`FUNCTION_ALARM_MINUTES` of :data:`EVALUATION_MINUTES`.
- ``TableThrottles``: the task table's ``ReadThrottleEvents`` plus ``WriteThrottleEvents`` above zero in
  :data:`FUNCTION_ALARM_MINUTES` of :data:`EVALUATION_MINUTES` minutes.
- the mesh-level limit alarms of :mod:`asya_cdk.limit_alarms` (429/503 answers, index throttles, timed-out tasks,
  failed records of partial batch responses);
- ``TimerAgeAlarm``: the timer queue's oldest message older than :data:`TIMER_AGE_ALARM_SECONDS` for 5 minutes (a
  timer may wait up to 900 s by design, so its threshold is the actors' plus 900 s).

Placement: an actor's ``FunctionAlarm`` goes where its actor is when ``actor_alarms_with_actors`` (``placement:
nested``: into the actor's nested stack, under its ``Actor`` construct); otherwise under this construct, one child per
actor name. Metrics are built from names (queue and table names of P-NAME-4, the API's name), so no alarm needs a
reference to a resource of another stack but the function it watches. Missing data is never breaching: an idle mesh
publishes nothing. :func:`threshold_alarm` builds every alarm here and the mesh-wide ones of
:mod:`asya_cdk.observability`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asya import naming
from asya_cdk.actor import AGE_ALARM_SECONDS, Actor
from asya_cdk.alarmshape import threshold_alarm
from asya_cdk.backstop import Backstop
from asya_cdk.gateway import Gateway
from asya_cdk.limit_alarms import LimitAlarms

__all__ = [
    "API_5XX_RATE",
    "EVALUATION_MINUTES",
    "FUNCTION_ALARM_MINUTES",
    "TIMER_AGE_ALARM_SECONDS",
    "OperatorAlarms",
    "function_alarm",
    "threshold_alarm",
]

#: Minutes in alarm out of :data:`EVALUATION_MINUTES` (chosen): a lone failed invocation does not page anyone.
FUNCTION_ALARM_MINUTES: Final = 3
EVALUATION_MINUTES: Final = 5
#: Share of API requests answered 5xx that raises ``ApiServerErrors`` (chosen).
API_5XX_RATE: Final = 0.05
#: A timer waits up to 900 s (an SQS delay) before it is due; older than that plus the actors' threshold is late.
TIMER_AGE_ALARM_SECONDS: Final = 900 + AGE_ALARM_SECONDS
_PERIOD: Final = Duration.minutes(1)
_AGE_MINUTES: Final = 5


def function_alarm(scope: Construct, id: str, function: lambda_.IFunction, label: str) -> cloudwatch.Alarm:
    """Errors plus throttles of ``function`` above zero in 3 of 5 minutes."""
    return threshold_alarm(
        scope,
        id,
        description=(
            f"{label}: Lambda errors or throttles in {FUNCTION_ALARM_MINUTES} of the last {EVALUATION_MINUTES} "
            "minutes. Errors: read the function's log group; throttles: the account's or the function's reserved "
            "concurrency is exhausted (docs/deploy.md, Alarms)."
        ),
        metric=cloudwatch.MathExpression(
            expression="FILL(errors, 0) + FILL(throttles, 0)",
            using_metrics={
                "errors": function.metric_errors(period=_PERIOD, statistic=cloudwatch.Stats.SUM),
                "throttles": function.metric_throttles(period=_PERIOD, statistic=cloudwatch.Stats.SUM),
            },
            label=f"{label} errors + throttles",
            period=_PERIOD,
        ),
        minutes=FUNCTION_ALARM_MINUTES,
        of_minutes=EVALUATION_MINUTES,
    )


class OperatorAlarms(Construct):
    """Function, API, table and timer-queue alarms of one mesh."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        namespace: str,
        actors: Sequence[Actor],
        backstop: Backstop,
        gateway: Gateway,
        actor_alarms_with_actors: bool,
        account_concurrency: int = 1000,
    ) -> None:
        super().__init__(scope, id)
        self._functions: dict[str, cloudwatch.Alarm] = {}
        holder = None if actor_alarms_with_actors else Construct(self, "Actors")
        for actor in actors:
            where: Construct = actor if holder is None else Construct(holder, actor.name)
            self._functions[actor.name] = function_alarm(
                where, "FunctionAlarm", actor.function, f"actor {actor.name} ({namespace})"
            )
        for key, id_, function in (
            ("gateway", "Gateway", gateway.function),
            ("gateway-stream", "GatewayStream", gateway.stream_function),
            ("backstop", "Backstop", backstop.function),
        ):
            self._functions[key] = function_alarm(self, f"{id_}FunctionAlarm", function, f"{key} ({namespace})")
        self._api = threshold_alarm(
            self,
            "ApiServerErrors",
            description=(
                f"Over {API_5XX_RATE:.0%} of the requests to API asya-{namespace} answered 5xx in "
                f"{FUNCTION_ALARM_MINUTES} of the last {EVALUATION_MINUTES} minutes: the gateway functions fail, "
                "time out or are throttled; read their log groups and the API's access log."
            ),
            metric=cloudwatch.Metric(
                namespace="AWS/ApiGateway",
                metric_name="5XXError",
                dimensions_map={"ApiName": gateway.api.rest_api_name},
                statistic=cloudwatch.Stats.AVERAGE,
                period=_PERIOD,
            ),
            threshold=API_5XX_RATE,
            minutes=FUNCTION_ALARM_MINUTES,
            of_minutes=EVALUATION_MINUTES,
        )
        table = naming.table_name(namespace)
        self._table = threshold_alarm(
            self,
            "TableThrottles",
            description=(
                f"DynamoDB throttled requests to {table} in {FUNCTION_ALARM_MINUTES} of the last "
                f"{EVALUATION_MINUTES} minutes: a hot partition or the table's throughput limit; the SDK retries, "
                "but tasks slow down and writes may fail."
            ),
            metric=cloudwatch.MathExpression(
                expression="FILL(reads, 0) + FILL(writes, 0)",
                using_metrics={
                    name: cloudwatch.Metric(
                        namespace="AWS/DynamoDB",
                        metric_name=metric,
                        dimensions_map={"TableName": table},
                        statistic=cloudwatch.Stats.SUM,
                        period=_PERIOD,
                    )
                    for name, metric in (("reads", "ReadThrottleEvents"), ("writes", "WriteThrottleEvents"))
                },
                label=f"{table} throttle events",
                period=_PERIOD,
            ),
            minutes=FUNCTION_ALARM_MINUTES,
            of_minutes=EVALUATION_MINUTES,
        )
        self._limits = LimitAlarms(
            self, "Limits", namespace=namespace, gateway=gateway, account_concurrency=account_concurrency
        )
        timer_queue = naming.queue_name(namespace, naming.DEADLINE)
        self._timer_age = threshold_alarm(
            self,
            "TimerAgeAlarm",
            description=(
                f"The oldest message in {timer_queue} is over {TIMER_AGE_ALARM_SECONDS} s old: the deadline "
                "backstop is failing or throttled, so deadlines are not enforced (GW-BACK-1)."
            ),
            metric=cloudwatch.Metric(
                namespace="AWS/SQS",
                metric_name="ApproximateAgeOfOldestMessage",
                dimensions_map={"QueueName": timer_queue},
                statistic=cloudwatch.Stats.MAXIMUM,
                period=_PERIOD,
            ),
            threshold=TIMER_AGE_ALARM_SECONDS,
            minutes=_AGE_MINUTES,
            of_minutes=_AGE_MINUTES,
        )

    @property
    def function_alarms(self) -> Mapping[str, cloudwatch.Alarm]:
        """``FunctionAlarm`` by actor name, ``gateway``, ``gateway-stream`` and ``backstop``."""
        return dict(self._functions)

    @property
    def api_server_errors(self) -> cloudwatch.Alarm:
        return self._api

    @property
    def table_throttles(self) -> cloudwatch.Alarm:
        return self._table

    @property
    def timer_age(self) -> cloudwatch.Alarm:
        return self._timer_age

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        """Every alarm of this construct."""
        return [*self._functions.values(), self._api, self._table, self._timer_age, *self._limits.alarms.values()]

    @property
    def limit_alarms(self) -> Mapping[str, cloudwatch.Alarm]:
        """The mesh-level limit alarms (``asya_cdk.limit_alarms``) by name."""
        return self._limits.alarms
