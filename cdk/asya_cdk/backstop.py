"""The deadline backstop: a function run by an EventBridge schedule every 60 s (GATEWAY GW-BACK-1) that fails tasks
past their deadline (GW-BACK-2). Its code is the gateway asset; its handler is a plain Lambda handler (no adapter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from asya_cdk.errors import DeploymentError

__all__ = ["BACKSTOP_INTERVAL", "Backstop"]

#: GW-BACK-1.
BACKSTOP_INTERVAL: Final = Duration.minutes(1)


class Backstop(Construct):
    """Scheduled function + rule."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        handler: str,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        memory: int = 256,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        if not handler or "." not in handler:
            raise DeploymentError(f"backstop handler must be 'module.function', got {handler!r}")
        super().__init__(scope, id)
        self._log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self._function = lambda_.Function(
            self,
            "Function",
            description="asya deadline backstop (GW-BACK-1)",
            runtime=runtime,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=code,
            layers=list(layers),
            memory_size=memory,
            # A sweep that outlives the interval would overlap the next one; concurrent runs are safe (GW-BACK-2).
            timeout=Duration.seconds(55),
            environment=dict(environment),
            log_group=self._log_group,
            # A failed sweep is redone by the next scheduled run; Lambda's own async retries would only overlap it.
            retry_attempts=0,
        )
        self._rule = events.Rule(
            self,
            "Schedule",
            description="asya deadline backstop every 60 s (GW-BACK-1)",
            schedule=events.Schedule.rate(BACKSTOP_INTERVAL),
            targets=[targets.LambdaFunction(self._function, retry_attempts=0)],
        )

    @property
    def function(self) -> lambda_.Function:
        return self._function

    @property
    def rule(self) -> events.Rule:
        return self._rule
