"""The manifest's data-lifecycle and network blocks (read by the CDK app only; docs/deploy.md, "Data lifecycle" and
"VPC"): the checkpoint lifecycle rule and the table's backup plan (under ``storage``), and the VPC the functions run
in (``deployment.vpc``).

Each check that spans members raises :class:`~asya.manifest.problems.MemberError` naming the member it blames, so an
error reads ``storage.checkpoints.transition_days: ...``.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from asya.manifest.problems import MemberError

__all__ = [
    "MIN_TRANSITION_DAYS",
    "READABLE_CLASSES",
    "STORAGE_CLASSES",
    "BackupConfig",
    "CheckpointLifecycle",
    "VpcConfig",
]

#: The S3 storage classes a lifecycle rule may move objects to (CloudFormation's ``StorageClass`` values).
STORAGE_CLASSES: Final = ("STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE")
#: S3 refuses a transition to the infrequent-access classes before an object is 30 days old.
MIN_TRANSITION_DAYS: Final = {"STANDARD_IA": 30, "ONEZONE_IA": 30}
#: The storage classes S3 serves a GET from without a restore: a checkpoint moved to one of these still gives a task
#: its result (GW-DATA-10).
READABLE_CLASSES: Final = frozenset({"STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR"})
#: A task record lives this long after its end (GW-DATA-7); ``asya.tableschema.TASKS_RETENTION_DAYS``.
_TASK_RECORD_DAYS: Final = 30
#: An EventBridge-style cron expression, as AWS Backup takes it: ``cron(min hour day month weekday year)``.
_CRON_RE: Final = re.compile(r"^cron\((\S+ ){5}\S+\)$")
_VPC_ID_RE: Final = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID_RE: Final = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_ROUTE_TABLE_ID_RE: Final = re.compile(r"^rtb-[0-9a-f]{8,17}$")
_PREFIX_LIST_ID_RE: Final = re.compile(r"^pl-[0-9a-f]{8,17}$")


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _member_error(member: str, reason: str) -> ValueError:
    return MemberError(member, reason)


class CheckpointLifecycle(_Block):
    """``storage.checkpoints``: what happens to ``succeeded/`` and ``failed/`` checkpoints (kept by default,
    GW-DATA-7). ``transition_days`` moves them to ``transition_class`` first; it must come before ``expire_days``."""

    expire_days: int | None = Field(None, ge=1, strict=True)
    transition_days: int | None = Field(None, ge=1, strict=True)
    transition_class: str = "GLACIER_IR"

    @field_validator("transition_class")
    @classmethod
    def _class(cls, value: str) -> str:
        if value not in STORAGE_CLASSES:
            raise ValueError(
                f"{value!r} is not an S3 storage class a lifecycle rule can move to; use one of {list(STORAGE_CLASSES)}"
            )
        return value

    @model_validator(mode="after")
    def _order(self) -> CheckpointLifecycle:
        if self.transition_days is None:
            return self
        least = MIN_TRANSITION_DAYS.get(self.transition_class, 0)
        if self.transition_days < least:
            raise _member_error(
                "transition_days",
                f"{self.transition_days} is too early for {self.transition_class} (S3 requires at least {least} "
                f"days); set transition_days: {least} or more, or another transition_class",
            )
        if self.expire_days is not None and self.transition_days >= self.expire_days:
            raise _member_error(
                "transition_days",
                f"{self.transition_days} is not before expire_days {self.expire_days}; a transition must come before "
                "the expiry (lower transition_days, raise expire_days, or drop the transition)",
            )
        return self

    @property
    def active(self) -> bool:
        return self.expire_days is not None or self.transition_days is not None

    @property
    def serves_results(self) -> bool:
        """Whether a checkpoint stays readable with one GET for as long as its task record lives (30 days), so a
        task's result may be read from its checkpoint line instead of a result item (GW-DATA-10)."""
        if self.expire_days is not None and self.expire_days < _TASK_RECORD_DAYS:
            return False
        return (
            self.transition_days is None
            or self.transition_days >= _TASK_RECORD_DAYS
            or self.transition_class in READABLE_CLASSES
        )


class BackupConfig(_Block):
    """``storage.backup``: an AWS Backup plan for the task table (a vault, one rule, the table selected by ARN)."""

    #: When the backup runs (UTC), as AWS Backup takes it; default: daily at 03:00.
    schedule: str = "cron(0 3 * * ? *)"
    retention_days: int = Field(35, ge=1, le=36500, strict=True)
    #: An existing vault to use (the one a deleted stack retained, ``asya-{namespace}-backups``); unset: create it.
    vault_name: str | None = Field(None, pattern=r"^[a-zA-Z0-9\-_]{2,50}$")

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        if not _CRON_RE.match(value):
            raise ValueError(
                f"{value!r} is not a cron expression of six fields, such as 'cron(0 3 * * ? *)' (daily at 03:00 UTC)"
            )
        return value


class VpcConfig(_Block):
    """``deployment.vpc``: the VPC every function runs in. Without ``vpc_id`` the mesh creates one (two zones,
    isolated subnets, no NAT); with it, the mesh uses those subnets. The endpoints the functions need are created
    unless ``endpoints: false`` (the VPC has them already)."""

    vpc_id: str | None = None
    subnet_ids: list[str] = Field(default_factory=list)
    #: The zone of each subnet, in the same order (CloudFormation needs them for an imported VPC).
    availability_zones: list[str] = Field(default_factory=list)
    #: The route table of each subnet, in the same order: the gateway endpoints for S3 and DynamoDB attach to them.
    route_table_ids: list[str] = Field(default_factory=list)
    #: Managed prefix lists of S3 and DynamoDB (``com.amazonaws.{region}.s3``, ``...dynamodb``) for the functions'
    #: egress rule; unset: egress on 443 to any address, which in subnets without a NAT reaches only the endpoints.
    prefix_list_ids: list[str] = Field(default_factory=list)
    endpoints: bool = Field(True, strict=True)
    #: The subnets route to the internet (a NAT of your own): needed by ``jwt`` auth and ``callback_url``.
    internet_egress: bool = Field(False, strict=True)

    @field_validator("vpc_id")
    @classmethod
    def _vpc(cls, value: str | None) -> str | None:
        if value is not None and not _VPC_ID_RE.match(value):
            raise ValueError(f"{value!r} is not a VPC id (vpc-0123456789abcdef0)")
        return value

    @model_validator(mode="after")
    def _members(self) -> VpcConfig:
        for member, pattern, example in (
            ("subnet_ids", _SUBNET_ID_RE, "subnet-0123456789abcdef0"),
            ("route_table_ids", _ROUTE_TABLE_ID_RE, "rtb-0123456789abcdef0"),
            ("prefix_list_ids", _PREFIX_LIST_ID_RE, "pl-6ca54005"),
        ):
            for index, value in enumerate(getattr(self, member)):
                if not pattern.match(value):
                    raise _member_error(f"{member}[{index}]", f"{value!r} is not an id of the form {example}")
        if self.vpc_id is None:
            given = [m for m in ("subnet_ids", "availability_zones", "route_table_ids") if getattr(self, m)]
            if given:
                raise _member_error(given[0], "only with vpc_id (without it the mesh creates its own VPC)")
            if self.internet_egress:
                raise _member_error(
                    "internet_egress", "the VPC the mesh creates has no NAT; give vpc_id of a VPC that has one"
                )
            return self
        if len(self.subnet_ids) < 2:
            raise _member_error("subnet_ids", "give at least two subnets (in two zones) of vpc_id for the functions")
        for member in ("availability_zones", "route_table_ids"):
            if len(getattr(self, member)) != len(self.subnet_ids):
                raise _member_error(
                    member, f"give one per subnet_ids entry ({len(self.subnet_ids)}), in the same order"
                )
        return self

    @property
    def created(self) -> bool:
        """Whether the mesh creates the VPC."""
        return self.vpc_id is None
