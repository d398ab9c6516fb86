"""Gates on the synthesized templates (issue 19 "Tests"): cfn-lint clean, cdk-nag with zero unacknowledged findings
(every acknowledgment carries a reason), and a snapshot of the example stack normalised for asset hashes.

The snapshot is ``tests/infra/snapshots/asya-demo.template.json``. After an intended change to the template,
regenerate it with ``ASYA_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -p no:cacheprovider -n 0 -q
tests/infra/test_gates.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from asya_cdk.testing import SynthesizedMesh
from tests.cfn import LINT_REGIONS, cfn_lint_findings

pytestmark = pytest.mark.infra

SNAPSHOT = Path(__file__).parent / "snapshots" / "asya-demo.template.json"
#: CDK adds an explicit DependsOn from each function to its role, which a GetAtt already implies: CDK's pattern.
_CFN_LINT_IGNORED = ("W3005",)
_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def _template_path(synth: SynthesizedMesh) -> Path:
    return synth.outdir / f"{synth.built.stack.artifact_id}.template.json"


def test_cfn_lint_is_clean(example_synth: SynthesizedMesh) -> None:
    """Against every region of :data:`tests.cfn.LINT_REGIONS` (the other templates of the tier against one)."""
    template = _template_path(example_synth).read_text(encoding="utf-8")
    findings = cfn_lint_findings(template, ignored=_CFN_LINT_IGNORED, regions=LINT_REGIONS)
    assert findings == []


def test_cdk_nag_acknowledgments_all_have_reasons(example_synth: SynthesizedMesh) -> None:
    report = example_synth.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []
    template = json.loads(_template_path(example_synth).read_text(encoding="utf-8"))
    text = json.dumps(template)
    # no resource carries a suppression without a reason (cdk-nag 3 writes none into the template at all)
    assert '"reason": ""' not in text


def _normalise(value: Any) -> Any:
    """The template with asset hashes, asset keys and the CDK version metadata replaced by placeholders."""
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items() if k not in ("aws:cdk:path", "aws:asset:path")}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, str):
        return _HASH.sub("<asset-hash>", value)
    return value


def test_snapshot_of_the_example_stack(example_synth: SynthesizedMesh) -> None:
    template = json.loads(_template_path(example_synth).read_text(encoding="utf-8"))
    template.get("Resources", {}).pop("CDKMetadata", None)
    template.get("Conditions", {}).pop("CDKMetadataAvailable", None)
    actual = json.dumps(_normalise(template), indent=1, sort_keys=True) + "\n"
    if os.environ.get("ASYA_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(actual, encoding="utf-8")
    assert SNAPSHOT.is_file(), f"no snapshot at {SNAPSHOT}; generate it (module doc)"
    assert actual == SNAPSHOT.read_text(encoding="utf-8"), f"template changed; regenerate {SNAPSHOT.name} (module doc)"
