"""Trivial actor handlers the overhead and memory benchmarks wrap with the layer (``ASYA_HANDLER=bench.handlers.echo``).

They do no work of their own, so what a benchmark measures around them is the layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["echo"]


def echo(payload: Any) -> Any:
    """Return the payload unchanged: one frame to the next actor of the route."""
    return payload
