"""Composition of the CDK app: context -> settings, manifest -> stack, cdk-nag on top. ``cdk/app.py`` and the infra
tests build the app through :func:`build_app` so both synthesize exactly the same thing.

Context: ``cdk.json``'s ``context`` (feature flags and the ``asya:*`` defaults) is passed to ``cdk.App(context=...)``
because ``python cdk/app.py`` does not read ``cdk.json``; values given to the CDK CLI (``-c``) still win. The manifest
path is context ``manifest`` (default ``./asya.yaml``), relative to the working directory.

cdk-nag 3 runs as a policy-validation plugin (``AwsSolutionsChecks``) during ``app.synth()``: an unacknowledged
finding fails the synthesis. Acknowledgments, each with its reason, live next to the resources they concern.
:func:`synthesize` then checks the templates against the limits a deployment would hit (:mod:`asya_cdk.limits`),
raising one error that lists them all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import cx_api
from cdk_nag import AwsSolutionsChecks

from asya.manifest import load_manifest
from asya_cdk.assets import SourceLayout
from asya_cdk.dependencies import DependencyBuilder
from asya_cdk.errors import DeploymentError
from asya_cdk.limits import LimitReport, check_assembly, enforce
from asya_cdk.settings import CONTEXT, DeploySettings
from asya_cdk.stack import AsyaStack, default_stack_name

__all__ = ["BuiltApp", "build_app", "load_cdk_context", "synthesize"]

DEFAULT_MANIFEST = "./asya.yaml"


def load_cdk_context(cdk_json: Path) -> dict[str, Any]:
    """The ``context`` object of ``cdk.json``."""
    try:
        data = json.loads(cdk_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DeploymentError(f"cannot read the CDK context from {cdk_json}: {exc}") from None
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise DeploymentError(f"{cdk_json}: 'context' must be an object, got {type(context).__name__}")
    return context


@dataclass(frozen=True, slots=True)
class BuiltApp:
    app: cdk.App
    stack: AsyaStack
    settings: DeploySettings


def build_app(
    *,
    repo_root: Path,
    context: Mapping[str, Any],
    env: Mapping[str, str],
    outdir: str | None = None,
    dependencies: DependencyBuilder | None = None,
    nag: bool = True,
) -> BuiltApp:
    """Create the app and the mesh's stack; ``env`` supplies ``CDK_DEFAULT_REGION``. Nothing is synthesized yet."""
    app = cdk.App(context=dict(context), outdir=outdir, analytics_reporting=False, stack_traces=False)
    values = {
        key: value
        for key in (getattr(CONTEXT, f.name) for f in fields(CONTEXT))
        if (value := app.node.try_get_context(key)) is not None
    }
    settings = DeploySettings.from_context(values, env)
    manifest = load_manifest(Path(str(values.get(CONTEXT.manifest, DEFAULT_MANIFEST))))
    stack = AsyaStack(
        app,
        settings.stack_name or default_stack_name(manifest),
        manifest=manifest,
        sources=SourceLayout.from_repo(repo_root),
        settings=settings,
        dependencies=dependencies,
    )
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return BuiltApp(app=app, stack=stack, settings=settings)


def synthesize(built: BuiltApp) -> tuple[cx_api.CloudAssembly, LimitReport]:
    """Synthesize ``built`` and check its templates' limits; raises :class:`~asya_cdk.limits.LimitError` listing every
    limit exceeded. The report's warnings are the caller's to print."""
    assembly = built.app.synth()
    report = check_assembly(assembly)
    enforce(report)
    return assembly, report
