"""cfn-lint for the infra tier, in one place.

The templates are region-agnostic (no region-specific resource or AMI), so they are linted against three regions on
three continents rather than cfn-lint's all 46 (``lint_all``), which cost the suite minutes per template and found
nothing more. Errors (E) and warnings (W) count, as the ``cfn-lint`` command reports by default, with experimental
rules on; informational rules (I) are advice. W3005 (CDK's explicit DependsOn from a function to its role, already
implied by the GetAtt) is CDK's own, not ours.
"""

from __future__ import annotations

from collections.abc import Iterable

LINT_REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]
_IGNORED = frozenset({"W3005"})


def cfn_lint_findings(template: str, *, ignored: Iterable[str] = ()) -> list[str]:
    """``["<rule> <message>", ...]``: the template's E and W findings, empty when it is clean."""
    from cfnlint.api import ManualArgs, lint

    skip = _IGNORED | set(ignored)
    matches = lint(template, config=ManualArgs(include_experimental=True, regions=LINT_REGIONS))
    return [f"{m.rule.id} {m.message}" for m in matches if m.rule.id[:1] in ("E", "W") and m.rule.id not in skip]
