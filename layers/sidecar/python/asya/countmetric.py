"""One EMF count line of the runtime: a metric of unit ``Count`` in the namespace ``Asya`` (the Powertools setting of
every function), with the dimensions the caller names.

The Powertools metrics module loads on the first line printed, not at import: an actor whose batches never fail, the
common case, never pays for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["METRICS_NAMESPACE", "emit_count"]

#: The EMF namespace of the runtime's metrics.
METRICS_NAMESPACE: Final = "Asya"


def emit_count(name: str, count: int, dimensions: Mapping[str, str]) -> None:
    """Print one EMF line: the metric ``name`` with value ``count`` and the given dimensions."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    with single_metric(
        name=name, unit=MetricUnit.Count, value=count, namespace=METRICS_NAMESPACE, default_dimensions=dict(dimensions)
    ):
        pass
