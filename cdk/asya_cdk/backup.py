"""The task table's AWS Backup plan (``storage.backup``): a vault, one rule and the table selected by its ARN.

- Vault ``asya-{namespace}-backups`` (encrypted with the mesh's customer-managed key when it has one, else AWS
  Backup's own key), retained with the stack's data: its recovery points are the point of it. With
  ``storage.backup.vault_name`` the plan uses that existing vault instead (a redeploy after ``destroy`` finds the
  retained vault by that name, as the table needs ``existing_table``).
- Rule ``table``: the manifest's ``schedule`` (a cron expression, UTC), recovery points deleted after
  ``retention_days``.
- Selection: the table's ARN, with the role CDK creates for AWS Backup (``AWSBackupServiceRolePolicyForBackup`` and
  ``...ForRestores``).

Point-in-time recovery stays on either way (35 days of restores to any second); the plan adds longer-lived,
separately stored recovery points.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_backup as backup
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from constructs import Construct

from asya.manifest import BackupConfig
from asya_cdk.nag import acknowledge

__all__ = ["TableBackup"]


class TableBackup(Construct):
    """An AWS Backup plan for the task table."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        namespace: str,
        table: dynamodb.ITable,
        config: BackupConfig,
        key: kms.IKey | None,
        retain: bool,
    ) -> None:
        super().__init__(scope, id)
        self._vault: backup.IBackupVault = (
            backup.BackupVault.from_backup_vault_name(self, "Vault", config.vault_name)
            if config.vault_name is not None
            else backup.BackupVault(
                self,
                "Vault",
                backup_vault_name=f"asya-{namespace}-backups",
                encryption_key=key,
                removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
            )
        )
        self._plan = backup.BackupPlan(
            self, "Plan", backup_plan_name=f"asya-{namespace}-tasks", backup_vault=self._vault
        )
        self._plan.add_rule(
            backup.BackupPlanRule(
                rule_name="table",
                schedule_expression=events.Schedule.expression(config.schedule),
                delete_after=Duration.days(config.retention_days),
            )
        )
        self._selection = self._plan.add_selection(
            "Table", resources=[backup.BackupResource.from_arn(table.table_arn)], allow_restores=True
        )
        for policy in ("AWSBackupServiceRolePolicyForBackup", "AWSBackupServiceRolePolicyForRestores"):
            acknowledge(
                self._selection,
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{policy}]",
                "AWS Backup's own service-role policy, what AWS Backup documents for a selection's role; it acts "
                "only on the resources the selection names (the task table).",
            )

    @property
    def vault(self) -> backup.IBackupVault:
        return self._vault

    @property
    def plan(self) -> backup.BackupPlan:
        return self._plan

    @property
    def selection(self) -> backup.BackupSelection:
        return self._selection
