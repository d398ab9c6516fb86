"""Acknowledging cdk-nag findings (cdk-nag 3: CDK's native ``Validations.of(scope).acknowledge``).

Every acknowledgment names one rule or one finding (``AwsSolutions-IAM5[Resource::...]``) and says why it is
acceptable; it applies to ``scope`` and everything below it. cdk-nag 3 matches findings exactly (no prefix matching),
so :func:`acknowledge_wildcard_resources` renders a resource ARN the way cdk-nag prints it (``<LogicalId.Arn>`` for an
attribute, ``<Ref>`` for a reference or a pseudo parameter) and acknowledges exactly that finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

__all__ = ["acknowledge", "acknowledge_wildcard_resources", "nag_resource"]


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def nag_resource(scope: IConstruct, value: str) -> str:
    """``value`` (a string that may hold tokens) as cdk-nag renders it in a finding id, resolved in ``scope``'s
    stack."""
    return _render(Stack.of(scope).resolve(value))


def acknowledge_wildcard_resources(scope: IConstruct, resources: Iterable[str], reason: str) -> None:
    """Acknowledge ``AwsSolutions-IAM5[Resource::...]`` for each of ``resources`` that holds a wildcard."""
    for resource in resources:
        rendered = nag_resource(scope, resource)
        if "*" in rendered:
            acknowledge(scope, f"AwsSolutions-IAM5[Resource::{rendered}]", reason)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (name, arg), *_ = value.items()
        if name == "Ref":
            return f"<{arg}>"
        if name == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if name == "Fn::Join":
            separator, parts = arg
            return str(separator).join(_render(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as a cdk-nag finding")
