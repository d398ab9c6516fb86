"""``capacity``: the task rate a mesh is built for (docs/capacity.md). ``asya synth`` derives the stage throttle,
the created-index shard count, the event sources' concurrency or provisioned pollers, the table's warm throughput
and the gateway's ``Retry-After`` from it, and refuses a target the account's quotas (``deployment.quotas``, else
AWS's defaults) cannot serve."""

from __future__ import annotations

import math
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_TARGET_RATE", "CapacityTarget"]

#: A rate the defaults serve (the stage throttle's 100 requests/s with room for a GET per task).
DEFAULT_TARGET_RATE: Final = 50.0
PAYLOAD_SIZES: Final = (100, 1024, 10 * 1024)


class CapacityTarget(BaseModel):
    """The declared target: tasks per second, how long a burst above it lasts, and how the rate splits over flows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: tasks per second the mesh must sustain
    target_rate: float = Field(DEFAULT_TARGET_RATE, gt=0, le=10_000_000)
    #: seconds of the target rate the stage absorbs at once (its burst) before it throttles
    burst_seconds: float = Field(2.0, ge=0, le=3600)
    #: share of the rate per flow; empty: the flows share it equally
    mix: dict[str, float] = Field(default_factory=dict)
    #: share of tasks a client watches to the end (SSE, MCP or A2A waits): each holds a stream function
    watched_share: float = Field(0.0, ge=0, le=1)
    #: typical input size in bytes, which picks the measured vector (100 B, 1 KB or 10 KB)
    payload_bytes: int = Field(1024, ge=1, le=256 * 1024, strict=True)

    @field_validator("mix")
    @classmethod
    def _mix(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not (isinstance(v, int | float) and v > 0)}
        if bad:
            raise ValueError(f"every share must be > 0, got {bad!r}")
        if value and not math.isclose(sum(value.values()), 1.0, abs_tol=1e-6):
            raise ValueError(f"the shares must add up to 1, they add up to {sum(value.values()):g}")
        return value

    def shares(self, flows: list[str]) -> dict[str, float]:
        """Share of the rate per flow."""
        if self.mix:
            return dict(self.mix)
        return {flow: 1 / len(flows) for flow in flows} if flows else {}
