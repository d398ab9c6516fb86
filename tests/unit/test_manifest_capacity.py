"""The manifest's ``capacity`` block and ``deployment.quotas``: bad values are named with the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya.exceptions import ManifestError
from asya.manifest import parse_manifest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _with(**sections: Any) -> Any:
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    for name, value in sections.items():
        data[name] = {**data.get(name, {}), **value}
    return parse_manifest(data, base_dir=REPO)


def test_the_default_target_is_modest_and_not_declared() -> None:
    manifest = _with()
    assert manifest.capacity.target_rate == 50
    assert "capacity" not in manifest.model_fields_set


def test_a_mix_must_add_up_to_one() -> None:
    with pytest.raises(ManifestError, match=r"capacity\.mix.*add up to 1, they add up to 0\.9"):
        _with(capacity={"target_rate": 100, "mix": {"text-pipeline": 0.5, "sentences": 0.4}})


def test_a_mix_names_existing_flows() -> None:
    with pytest.raises(ManifestError, match=r"capacity\.mix\.nope: no flow 'nope'"):
        _with(capacity={"target_rate": 100, "mix": {"nope": 1.0}})


def test_an_unknown_quota_is_named() -> None:
    with pytest.raises(ManifestError, match=r"deployment\.quotas.*unknown quota 'lambda_concurency'"):
        _with(deployment={"quotas": {"lambda_concurency": 2000}})


def test_a_hard_limit_cannot_be_declared() -> None:
    with pytest.raises(ManifestError, match=r"deployment\.quotas\.dynamodb_partition_wcu: 2000.* does not raise"):
        _with(deployment={"quotas": {"dynamodb_partition_wcu": 2000}})


def test_a_raised_quota_is_kept() -> None:
    assert _with(deployment={"quotas": {"lambda_concurrency": 5000}}).deployment.quotas == {"lambda_concurrency": 5000}
