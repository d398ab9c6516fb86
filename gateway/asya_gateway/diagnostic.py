"""Queue health for ``POST /api/v1/system/mq-diagnostic`` (GW-OPS-3, GW-OPS-4).

For each actor: its queue ``asya-{ns}-{actor}`` and DLQ ``asya-{ns}-{actor}-dlq``, with ``depth``, ``in_flight`` and
``delayed`` from ``ApproximateNumberOfMessages``, ``...NotVisible`` and ``...Delayed``, and ``oldest_age_seconds``
from the latest CloudWatch ``ApproximateAgeOfOldestMessage`` datapoint of the last 5 min (only when CloudWatch is
enabled, i.e. in AWS; always null locally). A missing queue has ``exists: false`` and null counts; a failed call adds
``"error": "<AWS error code>"``. ``healthy`` is true when every queue and DLQ exists and every DLQ is empty.
A name the manifest does not declare (an actor since removed, GW-OPS-5) is reported with ``declared: false``; it is
healthy when nothing waits in its queue or its DLQ, whether or not they still exist.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import naming
from asya.manifest import Manifest
from asya.timeutil import Clock, format_ts_ms

__all__ = ["MAX_DIAGNOSTIC_NAMES", "QueueDiagnostic", "diagnostic_actors"]

#: GW-OPS-3: the longest ``actors`` list a diagnostic request may give (counted as sent, duplicates included).
MAX_DIAGNOSTIC_NAMES: Final = 200

_NO_QUEUE: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_ATTRIBUTES: Final = {
    "depth": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}


def diagnostic_actors(manifest: Manifest) -> list[str]:
    """Every actor of the manifest: user actors, the crew it deploys and its fan-in aggregators."""
    names = [actor.name for actor in manifest.deployed_actors()]
    aggregators = sorted(manifest.routable_names() - set(manifest.actors) - naming.FIXED_CREW)
    return names + [name for name in aggregators if name not in names]


def _healthy(entry: dict[str, Any]) -> bool:
    """A declared actor's queue and DLQ exist and its DLQ is empty; an undeclared name holds nothing: no envelope
    waits in a queue left behind, nothing in its DLQ (GW-OPS-5)."""
    queue, dlq = entry, entry["dlq"]
    if entry["declared"]:
        return bool(queue["exists"] and dlq["exists"] and dlq["depth"] == 0)
    stranded = (queue.get(field) or 0 for field in ("depth", "in_flight", "delayed"))
    return not any(stranded) and not dlq.get("depth")


def _error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or type(exc).__name__)
    return type(exc).__name__


class QueueDiagnostic:
    def __init__(self, *, namespace: str, sqs: Any, clock: Clock, cloudwatch: Any = None, use_cloudwatch: bool) -> None:
        self._namespace = namespace
        self._sqs = sqs
        self._clock = clock
        self._cloudwatch = cloudwatch
        self._use_cloudwatch = use_cloudwatch

    def check(self, actors: Sequence[str], *, declared: Collection[str]) -> dict[str, Any]:
        """Each of ``actors``; ``declared``: the names of the manifest (GW-OPS-5: any other is reported too)."""
        queues = []
        for actor in actors:
            entry = {"actor": actor, "declared": actor in declared}
            entry.update(self._queue(naming.queue_name(self._namespace, actor), counts=True))
            entry["dlq"] = self._queue(naming.dlq_name(self._namespace, actor), counts=False)
            queues.append(entry)
        healthy = all(_healthy(q) for q in queues)
        return {
            "namespace": self._namespace,
            "checked_at": format_ts_ms(self._clock()),
            "healthy": healthy,
            "queues": queues,
        }

    def _queue(self, name: str, *, counts: bool) -> dict[str, Any]:
        fields = ("depth", "in_flight", "delayed") if counts else ("depth",)
        out: dict[str, Any] = {"queue": name, "exists": False, **dict.fromkeys(fields), "oldest_age_seconds": None}
        try:
            url = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
            out["exists"] = True
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=[_ATTRIBUTES[field] for field in fields]
            )["Attributes"]
            for field in fields:
                out[field] = int(attributes.get(_ATTRIBUTES[field], 0))
        except ClientError as exc:
            if _error_code(exc) not in _NO_QUEUE:
                out["error"] = _error_code(exc)
            return out
        except BotoCoreError as exc:
            out["error"] = _error_code(exc)
            return out
        if self._use_cloudwatch:
            try:
                out["oldest_age_seconds"] = self._oldest_age(name)
            except (ClientError, BotoCoreError) as exc:
                out["error"] = _error_code(exc)
        return out

    def _oldest_age(self, name: str) -> int | None:
        if self._cloudwatch is None:
            from asya.awsclients import GATEWAY_BUDGET, aws_client

            self._cloudwatch = aws_client("cloudwatch", GATEWAY_BUDGET)
        now = self._clock()
        points = self._cloudwatch.get_metric_statistics(
            Namespace="AWS/SQS",
            MetricName="ApproximateAgeOfOldestMessage",
            Dimensions=[{"Name": "QueueName", "Value": name}],
            StartTime=now - timedelta(minutes=5),
            EndTime=now,
            Period=60,
            Statistics=["Maximum"],
        )["Datapoints"]
        if not points:
            return None
        latest = max(points, key=lambda point: point["Timestamp"])
        return int(latest["Maximum"])
