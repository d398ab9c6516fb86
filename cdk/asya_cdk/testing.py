"""Synthesizing a mesh for template assertions (``aws_cdk.assertions``), exactly as ``cdk/app.py`` does: the
context of ``cdk.json`` (feature flags), the manifest given, cdk-nag enforced. Used by the infra tests; usable for a
project's own checks of its manifest.

The first synthesis on a machine builds the dependency layers with pip (cached under ``.cdk.staging/``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template

from asya_cdk.composition import BuiltApp, build_app, load_cdk_context, synthesize
from asya_cdk.limits import LimitReport

__all__ = ["SynthesizedMesh", "build_mesh_app", "synthesize_mesh"]


@dataclass(frozen=True)
class SynthesizedMesh:
    """A synthesized mesh: the app, its output directory and the stack's template."""

    built: BuiltApp
    outdir: Path
    template: Template
    resources: Mapping[str, dict[str, Any]]
    outputs: Mapping[str, dict[str, Any]]
    limits: LimitReport

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        """Resources of one CloudFormation type, by logical id."""
        return {key: res for key, res in self.resources.items() if res["Type"] == cfn_type}

    def validation_report(self) -> dict[str, Any]:
        """The policy-validation report (cdk-nag findings) written next to the template."""
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text(encoding="utf-8"))
        return report


def build_mesh_app(
    manifest: Path, *, repo_root: Path, outdir: Path, context: Mapping[str, Any] | None = None
) -> BuiltApp:
    """The app for ``manifest`` with ``repo_root``'s ``cdk.json`` context plus ``context``; not synthesized."""
    merged = {**load_cdk_context(repo_root / "cdk.json"), "manifest": str(manifest), **(context or {})}
    return build_app(repo_root=repo_root, context=merged, env={}, outdir=str(outdir))


def synthesize_mesh(
    manifest: Path, *, repo_root: Path, outdir: Path, context: Mapping[str, Any] | None = None
) -> SynthesizedMesh:
    """Build and synthesize; raises when cdk-nag reports an unacknowledged finding or a limit is exceeded
    (:class:`~asya_cdk.limits.LimitError`)."""
    built = build_mesh_app(manifest, repo_root=repo_root, outdir=outdir, context=context)
    assembly, report = synthesize(built)
    template: dict[str, Any] = assembly.get_stack_artifact(built.stack.artifact_id).template
    return SynthesizedMesh(
        built=built,
        outdir=outdir,
        template=Template.from_json(template),
        resources=template["Resources"],
        outputs=template.get("Outputs", {}),
        limits=report,
    )
