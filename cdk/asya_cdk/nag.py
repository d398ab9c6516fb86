"""Acknowledging cdk-nag findings (cdk-nag 3: CDK's native ``Validations.of(scope).acknowledge``).

Every acknowledgment names one rule or one finding (``AwsSolutions-IAM5[Resource::...]``) and says why it is
acceptable; it applies to ``scope`` and everything below it.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

__all__ = ["acknowledge"]


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
