"""The limits a deployment would hit, checked over the synthesized templates, all at once.

:func:`check_assembly` reads every template of a cloud assembly (each stack's, and each nested stack's
``*.nested.template.json``) and returns a :class:`LimitReport`: one line per limit exceeded (errors) and per quota
that may be reached (warnings). :func:`enforce` raises :class:`LimitError` listing every error. ``cdk/app.py`` and
:func:`asya_cdk.testing.synthesize_mesh` run both after ``app.synth()``; in an app of your own call
``enforce(check_assembly(app.synth()))``.

Limits (AWS quotas that cannot be raised):

- CloudFormation, per stack: :data:`MAX_RESOURCES` resources, :data:`MAX_OUTPUTS` outputs, :data:`MAX_PARAMETERS`
  parameters; a template uploaded to S3 (the CDK CLI uploads every template of a stack synthesized with the default
  synthesizer, which records ``stackTemplateAssetObjectUrl``; nested templates always) at most
  :data:`MAX_TEMPLATE_BYTES`, a template sent inline at most :data:`MAX_INLINE_TEMPLATE_BYTES`;
- Lambda: a function's environment, the sum of every key's and value's length, at most :data:`MAX_ENVIRONMENT_BYTES`;
  a function name at most 64 characters;
- SQS: a queue name at most 80 characters; IAM: a role name at most 64 characters, a role's inline policies together
  at most :data:`MAX_ROLE_POLICY_CHARS` characters without whitespace;
- CloudWatch: a dashboard at most :data:`MAX_DASHBOARD_WIDGETS` widgets, a graph at most
  :data:`MAX_WIDGET_METRICS` metrics.

Quota warned about: the roles the mesh creates, against :data:`ROLE_WARNING` (half of IAM's default 1,000 roles per
account, which the account's other roles share).

A value CloudFormation resolves at deploy time (``Ref``, ``Fn::GetAtt``, ...) counts :data:`TOKEN_ESTIMATE`
characters (the mesh's names and ARNs are shorter), a pseudo parameter its longest value; policy sizes count the
template's own rendering of such values. Both are estimates, erring long.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asya_cdk.errors import DeploymentError

__all__ = [
    "MAX_DASHBOARD_WIDGETS",
    "MAX_ENVIRONMENT_BYTES",
    "MAX_INLINE_TEMPLATE_BYTES",
    "MAX_OUTPUTS",
    "MAX_PARAMETERS",
    "MAX_RESOURCES",
    "MAX_ROLE_POLICY_CHARS",
    "MAX_TEMPLATE_BYTES",
    "MAX_WIDGET_METRICS",
    "ROLE_WARNING",
    "TOKEN_ESTIMATE",
    "LimitError",
    "LimitReport",
    "SynthTemplate",
    "check_assembly",
    "check_templates",
    "enforce",
]

MAX_RESOURCES: Final = 500
MAX_OUTPUTS: Final = 200
MAX_PARAMETERS: Final = 200
MAX_TEMPLATE_BYTES: Final = 1_048_576
MAX_INLINE_TEMPLATE_BYTES: Final = 51_200
MAX_ENVIRONMENT_BYTES: Final = 4_096
MAX_ROLE_POLICY_CHARS: Final = 10_240
MAX_DASHBOARD_WIDGETS: Final = 500
MAX_WIDGET_METRICS: Final = 500
ROLE_WARNING: Final = 500
TOKEN_ESTIMATE: Final = 64
_NAME_LIMITS: Final[Mapping[str, tuple[str, int]]] = {
    "AWS::Lambda::Function": ("FunctionName", 64),
    "AWS::SQS::Queue": ("QueueName", 80),
    "AWS::IAM::Role": ("RoleName", 64),
}
_PSEUDO: Final[Mapping[str, int]] = {
    "AWS::AccountId": 12,
    "AWS::Region": 14,
    "AWS::Partition": 10,
    "AWS::URLSuffix": 13,
    "AWS::StackName": 128,
}
_NESTED_SUFFIX: Final = ".nested.template.json"


class LimitError(DeploymentError):
    """The synthesized templates exceed limits a deployment would hit; the message lists every one."""


@dataclass(frozen=True, slots=True)
class SynthTemplate:
    """One synthesized template: a name for messages, its body, its size in bytes and whether the CLI uploads it."""

    name: str
    body: Mapping[str, Any]
    size: int
    uploaded: bool = True


@dataclass(frozen=True, slots=True)
class LimitReport:
    errors: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())


def check_assembly(assembly: Any, *, role_warning: int = ROLE_WARNING) -> LimitReport:
    """Check every template of ``assembly`` (a ``cx_api.CloudAssembly``, from ``app.synth()``)."""
    templates: list[SynthTemplate] = []
    for artifact in assembly.stacks_recursively:
        path = Path(artifact.template_full_path)
        templates.append(
            SynthTemplate(
                name=artifact.stack_name,
                body=artifact.template,
                size=path.stat().st_size,
                uploaded=artifact.stack_template_asset_object_url is not None,
            )
        )
    for nested in sorted(Path(assembly.directory).glob(f"*{_NESTED_SUFFIX}")):
        body = json.loads(nested.read_text(encoding="utf-8"))
        templates.append(SynthTemplate(name=nested.name, body=body, size=nested.stat().st_size))
    return check_templates(templates, role_warning=role_warning)


def check_templates(templates: Iterable[SynthTemplate], *, role_warning: int = ROLE_WARNING) -> LimitReport:
    errors: list[str] = []
    roles = 0
    for template in templates:
        errors += _stack_limits(template)
        resources: Mapping[str, Any] = template.body.get("Resources", {})
        policy_chars: dict[str, int] = {}
        for logical_id, resource in resources.items():
            where = f"{template.name}: {logical_id}"
            kind = resource.get("Type")
            props: Mapping[str, Any] = resource.get("Properties", {})
            errors += _name_limit(where, kind, props)
            if kind == "AWS::Lambda::Function":
                errors += _environment(where, props)
            elif kind == "AWS::CloudWatch::Dashboard":
                errors += _dashboard(where, props)
            elif kind == "AWS::IAM::Role":
                roles += 1
                for policy in props.get("Policies", []):
                    policy_chars[logical_id] = policy_chars.get(logical_id, 0) + _compact(policy["PolicyDocument"])
            elif kind == "AWS::IAM::Policy":
                size = _compact(props.get("PolicyDocument", {}))
                for role in props.get("Roles", []):
                    if isinstance(role, dict) and "Ref" in role:
                        policy_chars[role["Ref"]] = policy_chars.get(role["Ref"], 0) + size
        errors += [
            f"{template.name}: role {role}: inline policies of {chars:,} characters, over IAM's "
            f"{MAX_ROLE_POLICY_CHARS:,}; grant on fewer, wider resources (a name prefix) or use a managed policy"
            for role, chars in sorted(policy_chars.items())
            if chars > MAX_ROLE_POLICY_CHARS
        ]
    warnings = []
    if roles > role_warning:
        warnings.append(
            f"the mesh creates {roles} IAM roles; IAM allows 1,000 per account by default (shared with every other "
            "role of the account): check the quota (Service Quotas, IAM 'Roles per account') before deploying"
        )
    return LimitReport(errors=tuple(errors), warnings=tuple(warnings))


def enforce(report: LimitReport) -> None:
    """Raise :class:`LimitError` listing every error of ``report``."""
    if report.errors:
        raise LimitError(
            "the synthesized templates exceed limits that would fail the deployment:\n- " + "\n- ".join(report.errors)
        )


def _stack_limits(template: SynthTemplate) -> list[str]:
    errors = []
    for section, limit, fix in (
        ("Resources", MAX_RESOURCES, "set deployment.placement: nested, or more deployment.actor_stacks"),
        ("Outputs", MAX_OUTPUTS, "export fewer values"),
        ("Parameters", MAX_PARAMETERS, "pass fewer values into the stack"),
    ):
        count = len(template.body.get(section, {}))
        if count > limit:
            errors.append(f"{template.name}: {count} {section.lower()}, over CloudFormation's {limit} per stack; {fix}")
    limit = MAX_TEMPLATE_BYTES if template.uploaded else MAX_INLINE_TEMPLATE_BYTES
    if template.size > limit:
        how = "uploaded to S3" if template.uploaded else "sent inline (no bootstrap asset bucket)"
        errors.append(
            f"{template.name}: template of {template.size:,} bytes, over CloudFormation's {limit:,} for a template "
            f"{how}; set deployment.placement: nested, or more deployment.actor_stacks"
        )
    return errors


def _name_limit(where: str, kind: Any, props: Mapping[str, Any]) -> list[str]:
    if kind not in _NAME_LIMITS:
        return []
    prop, limit = _NAME_LIMITS[kind]
    length = _length(props[prop]) if prop in props else 0
    if length <= limit:
        return []
    return [f"{where}: {prop} of {length} characters, over the limit of {limit}; use a shorter namespace or name"]


def _environment(where: str, props: Mapping[str, Any]) -> list[str]:
    variables: Mapping[str, Any] = props.get("Environment", {}).get("Variables", {})
    size = sum(len(key.encode("utf-8")) + _length(value) for key, value in variables.items())
    if size <= MAX_ENVIRONMENT_BYTES:
        return []
    actor = variables.get("ASYA_ACTOR")
    largest = sorted(variables, key=lambda key: -_length(variables[key]))[:3]
    return [
        f"{where}{f' (actor {actor})' if isinstance(actor, str) else ''}: environment of about {size:,} bytes, over "
        f"Lambda's {MAX_ENVIRONMENT_BYTES:,} (keys and values together); largest: {', '.join(largest)}; shorten the "
        "actor's env map (move large values to SSM Parameter Store or S3 and read them at start)"
    ]


def _dashboard(where: str, props: Mapping[str, Any]) -> list[str]:
    body = json.loads(_render(props.get("DashboardBody", "{}")))
    widgets = body.get("widgets", [])
    errors = []
    if len(widgets) > MAX_DASHBOARD_WIDGETS:
        errors.append(
            f"{where}: {len(widgets)} widgets, over CloudWatch's {MAX_DASHBOARD_WIDGETS} per dashboard; split it"
        )
    for number, widget in enumerate(widgets):
        metrics = widget.get("properties", {}).get("metrics", [])
        if len(metrics) > MAX_WIDGET_METRICS:
            errors.append(
                f"{where}: widget {number} has {len(metrics)} metrics, over CloudWatch's {MAX_WIDGET_METRICS} per "
                "graph; split it"
            )
    return errors


def _length(value: Any) -> int:
    """The length of a template value once CloudFormation resolves it (an estimate for intrinsics)."""
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (int, float, bool)):
        return len(json.dumps(value))
    if isinstance(value, dict) and len(value) == 1:
        ((name, arg),) = value.items()
        if name == "Ref" and arg in _PSEUDO:
            return _PSEUDO[arg]
        if name == "Fn::Join" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], list):
            separator, parts = arg
            return sum(_length(part) for part in parts) + len(str(separator)) * max(len(parts) - 1, 0)
    return TOKEN_ESTIMATE


def _render(value: Any) -> str:
    """A string property with its intrinsics replaced by placeholders of :data:`TOKEN_ESTIMATE` characters."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and list(value) == ["Fn::Join"]:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_render(part) for part in parts)
    return "x" * TOKEN_ESTIMATE


def _compact(document: Any) -> int:
    """IAM counts a policy's characters without whitespace."""
    return len(_WHITESPACE.sub("", json.dumps(document, separators=(",", ":"))))


_WHITESPACE: Final = re.compile(r"\s")
