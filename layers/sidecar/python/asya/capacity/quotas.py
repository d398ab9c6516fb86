"""The AWS quotas of the capacity model: ``quotas.toml`` (value, unit, source page, whether an estimate) and the
values a manifest declares for its account (``deployment.quotas``). Pure; the file is read once per call."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

__all__ = [
    "QUOTAS_FILE",
    "Assumptions",
    "Quota",
    "QuotaError",
    "Quotas",
    "load_quotas",
    "quota_names",
]

QUOTAS_FILE: Final = Path(__file__).resolve().parent / "quotas.toml"


class QuotaError(ValueError):
    """A declared quota the model does not know, or a hard limit declared with another value."""


@dataclass(frozen=True)
class Quota:
    name: str
    value: float
    unit: str
    source: str
    adjustable: bool
    estimate: bool = False
    note: str = ""
    declared: bool = False


@dataclass(frozen=True)
class Assumptions:
    """Figures AWS does not publish (``[assumptions]`` of ``quotas.toml``)."""

    handler_seconds: float
    call_seconds: Mapping[str, float]
    gateway_seconds: float
    hash_skew: float
    partition_headroom: float
    failure_share: float


@dataclass(frozen=True)
class Quotas:
    """Every quota by name, with the account's declared values applied."""

    quotas: Mapping[str, Quota]
    assumptions: Assumptions

    def __getitem__(self, name: str) -> float:
        return self.quotas[name].value

    def quota(self, name: str) -> Quota:
        return self.quotas[name]

    def declare(self, declared: Mapping[str, float]) -> Quotas:
        """These quotas with ``declared`` values (``deployment.quotas``) in place of the defaults."""
        unknown = sorted(set(declared) - set(self.quotas))
        if unknown:
            raise QuotaError(
                f"deployment.quotas: unknown quota {', '.join(repr(u) for u in unknown)}; "
                f"known: {', '.join(sorted(self.quotas))}"
            )
        out = dict(self.quotas)
        for name, value in declared.items():
            quota = out[name]
            if not quota.adjustable and float(value) != quota.value:
                raise QuotaError(
                    f"deployment.quotas.{name}: {value!r} declared, but AWS does not raise this limit "
                    f"({quota.value:g} {quota.unit})"
                )
            if not float(value) > 0:
                raise QuotaError(f"deployment.quotas.{name}: {value!r} must be > 0")
            out[name] = replace(quota, value=float(value), declared=True)
        return Quotas(out, self.assumptions)


def _load(text: str) -> Quotas:
    data: dict[str, Any] = tomllib.loads(text)
    quotas = {
        name: Quota(
            name=name,
            value=float(spec["value"]),
            unit=str(spec["unit"]),
            source=str(spec["source"]),
            adjustable=bool(spec["adjustable"]),
            estimate=bool(spec.get("estimate", False)),
            note=str(spec.get("note", "")),
        )
        for name, spec in data["quotas"].items()
    }
    a = data["assumptions"]
    assumptions = Assumptions(
        handler_seconds=float(a["handler_seconds"]),
        call_seconds={k: float(v) for k, v in a["call_seconds"].items()},
        gateway_seconds=float(a["gateway_seconds"]),
        hash_skew=float(a["hash_skew"]),
        partition_headroom=float(a["partition_headroom"]),
        failure_share=float(a["failure_share"]),
    )
    return Quotas(quotas, assumptions)


def load_quotas(declared: Mapping[str, float] | None = None, *, path: Path = QUOTAS_FILE) -> Quotas:
    """The documented defaults of ``path``, with ``declared`` values applied."""
    quotas = _load(path.read_text(encoding="utf-8"))
    return quotas.declare(declared) if declared else quotas


def quota_names(path: Path = QUOTAS_FILE) -> frozenset[str]:
    return frozenset(_load(path.read_text(encoding="utf-8")).quotas)
