"""The manifest's data-lifecycle and VPC settings (issue 26 items 8 and 9, ``asya.manifest.dataplane``): every bad
value is refused before anything is built, the error naming the field, the value and the fix (P-MAN-1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asya.exceptions import ManifestError
from asya.manifest import parse_manifest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
IMPORTED_VPC = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    "availability_zones": ["us-east-1a", "us-east-1b"],
    "route_table_ids": ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
}


def _manifest(namespace: str, **extra: Any) -> dict[str, Any]:
    return {"namespace": namespace, **extra}


@pytest.mark.parametrize(
    ("storage", "member", "words"),
    [
        ({"checkpoints": {"expire_days": 30, "transition_days": 60}}, "transition_days", ["60", "expire_days 30"]),
        ({"checkpoints": {"transition_days": 10, "transition_class": "STANDARD_IA"}}, "transition_days", ["30"]),
        ({"checkpoints": {"transition_class": "GLACIER_FAST"}}, "transition_class", ["'GLACIER_FAST'", "GLACIER_IR"]),
        ({"backup": {"schedule": "daily"}}, "backup.schedule", ["'daily'", "cron(0 3 * * ? *)"]),
        (
            {"create_kms_key": True, "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/abc"},
            "create_kms_key",
            ["not both"],
        ),
    ],
)
def test_storage_settings_are_validated_naming_key_value_and_fix(
    storage: dict[str, Any], member: str, words: list[str]
) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(_manifest("bad", storage=storage), base_dir=REPO)
    message = str(info.value)
    assert f"storage.{member}" in message or member in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("vpc", "member", "words"),
    [
        ({"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]}, "subnet_ids", ["two"]),
        ({"vpc_id": "vpc-1"}, "vpc_id", ["'vpc-1'"]),
        ({"subnet_ids": ["subnet-0123456789abcdef0"]}, "subnet_ids", ["only with vpc_id"]),
        ({"internet_egress": True}, "internet_egress", ["NAT"]),
        (
            {**IMPORTED_VPC, "route_table_ids": ["rtb-0123456789abcdef0"]},
            "route_table_ids",
            ["one per subnet_ids entry (2)"],
        ),
    ],
)
def test_vpc_settings_are_validated_naming_key_value_and_fix(
    vpc: dict[str, Any], member: str, words: list[str]
) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(_manifest("bad", deployment={"vpc": vpc}), base_dir=REPO)
    message = str(info.value)
    assert f"deployment.vpc.{member}" in message
    for word in words:
        assert word in message


def test_defaults_keep_checkpoints_and_add_nothing() -> None:
    """GW-DATA-7's default: checkpoints kept, no versioning, no backup, no VPC, no key."""
    manifest = parse_manifest(_manifest("plain"), base_dir=REPO)
    assert not manifest.storage.checkpoints.active
    assert manifest.storage.backup is None and manifest.deployment.vpc is None
    assert not manifest.storage.versioning and not manifest.storage.create_kms_key


def test_a_valid_imported_vpc_and_lifecycle_parse() -> None:
    manifest = parse_manifest(
        _manifest(
            "ok",
            storage={"checkpoints": {"expire_days": 365, "transition_days": 30, "transition_class": "STANDARD_IA"}},
            deployment={"vpc": IMPORTED_VPC},
        ),
        base_dir=REPO,
    )
    assert manifest.deployment.vpc is not None and not manifest.deployment.vpc.created
    assert manifest.storage.checkpoints.transition_class == "STANDARD_IA"
