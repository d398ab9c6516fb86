"""The capacity model (docs/capacity.md): where the mesh breaks on AWS, computed from the per-task request vectors
the bench measures (``vectors/``) and AWS's quotas (``quotas.toml``). Pure arithmetic; it runs at synthesis and in
``make capacity``, never in a Lambda."""

from __future__ import annotations

from asya.capacity.backstop import backstop_reservation
from asya.capacity.model import LIMIT_KINDS, Limit, Settings, evaluate, first_limit
from asya.capacity.plan import (
    HEADROOM,
    CapacityPlan,
    Shortfall,
    account_quotas,
    declared,
    drain_rates,
    mesh_demand,
    plan,
    raised_quotas,
    refusal,
)
from asya.capacity.quotas import Assumptions, Quota, QuotaError, Quotas, load_quotas
from asya.capacity.ramp import Ramp, RampStep, simulate
from asya.capacity.vectors import VECTORS_DIR, TaskDemand, Vector, demand_of, load_vector, vector_name

__all__ = [
    "HEADROOM",
    "LIMIT_KINDS",
    "VECTORS_DIR",
    "Assumptions",
    "CapacityPlan",
    "Limit",
    "Quota",
    "QuotaError",
    "Quotas",
    "Ramp",
    "RampStep",
    "Settings",
    "Shortfall",
    "TaskDemand",
    "Vector",
    "account_quotas",
    "backstop_reservation",
    "declared",
    "demand_of",
    "drain_rates",
    "evaluate",
    "first_limit",
    "load_quotas",
    "load_vector",
    "mesh_demand",
    "plan",
    "raised_quotas",
    "refusal",
    "simulate",
    "vector_name",
]
