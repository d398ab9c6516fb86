"""What invokes the assembly's functions besides the API: event source mappings and schedule rules.

:func:`start_event_source` runs one ``AWS::Lambda::EventSourceMapping`` as
:class:`asya_local.esm.EventSourceMapping`, polling with the function's own credentials (Lambda polls with the
function's execution role, so the poller's SQS calls are checked against it too); at most :data:`MAX_POLLERS`
concurrent pollers (the mapping's ``ScalingConfig.MaximumConcurrency`` is capped to it). :func:`start_schedules` runs
one :class:`~asya_local.artifact.functions.ScheduleTrigger` per target of every enabled schedule rule, every
``interval`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from asya.awsclients import LOCAL_BUDGET, aws_client
from asya_local.artifact.functions import FunctionPool, ScheduleTrigger
from asya_local.artifact.model import MeshSpec
from asya_local.artifact.process import Credentials
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.moto_server import MOTO_ACCOUNT_ID

__all__ = ["MAX_POLLERS", "start_event_source", "start_schedules"]

#: Concurrent pollers per mapping at most.
MAX_POLLERS: Final = 2


def start_event_source(
    spec: MeshSpec,
    source: Any,
    *,
    pools: Mapping[str, FunctionPool],
    credentials: Mapping[str, Credentials],
    endpoint: str,
    queue_endpoint: str,
    region: str,
    poll_wait: int,
) -> EventSourceMapping | None:
    """The started mapping of ``source`` (``None`` when it is disabled); ``endpoint`` is where its polls go (the
    IAM proxy), ``queue_endpoint`` what its queue URL names (moto)."""
    function = spec.functions.get(source.function)
    if function is None or source.function not in pools:
        raise LocalModeError(f"event source {source.logical_id}: {source.function} is not an invokable function")
    if not source.enabled:
        return None
    queue = spec.queues[source.queue_arn]
    keys = credentials[function.arn]
    import boto3

    sqs = aws_client(
        "sqs",
        LOCAL_BUDGET,
        session=boto3.Session(),
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=keys.access_key_id,
        aws_secret_access_key=keys.secret_access_key,
        aws_session_token=keys.session_token,
    )
    esm = EventSourceMapping(
        EsmConfig(
            function_name=function.name,
            queue_url=f"{queue_endpoint}/{MOTO_ACCOUNT_ID}/{queue.name}",
            batch_size=source.batch_size,
            max_concurrency=min(source.max_concurrency or 1, MAX_POLLERS),
            lambda_timeout=float(function.timeout),
            memory_mb=function.memory,
            wait_seconds=poll_wait,
            region=region,
            batching_window_seconds=source.batching_window,
        ),
        pools[function.arn].handler(report_batch_item_failures=source.report_batch_item_failures),
        sqs=sqs,
    )
    esm.start()
    return esm


def start_schedules(
    spec: MeshSpec, *, pools: Mapping[str, FunctionPool], interval: float, region: str
) -> list[ScheduleTrigger]:
    """One started trigger per target of every enabled schedule rule."""
    triggers: list[ScheduleTrigger] = []
    for schedule in spec.schedules:
        if not schedule.enabled:
            continue
        for target in schedule.functions:
            function = spec.functions[target]
            trigger = ScheduleTrigger(
                pools[target],
                rule_name=schedule.logical_id,
                function_name=function.name,
                interval=interval,
                timeout=function.timeout,
                memory=function.memory,
                region=region,
                account_id=MOTO_ACCOUNT_ID,
                monotonic=time.monotonic,
            )
            trigger.start()
            triggers.append(trigger)
    return triggers
