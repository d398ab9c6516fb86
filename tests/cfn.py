"""cfn-lint for the infra tier, in one place.

The templates are region-agnostic (no region-specific resource or AMI). What a second region adds to cfn-lint's run
is its own copy of the resource schemas: the types that exist there, and the properties and values they allow. So
:func:`cfn_lint_findings` lints against us-east-1, where every type and property appears first, and checks that
every resource type of the template exists in the other :data:`LINT_REGIONS` as well (a schema lookup). Linting
against all three costs each call about a quarter more CPU (5.3 s against 6.8 s on the example template, measured),
repeated for every template of the tier, and found nothing the lookup misses on these templates; the example
template, the one the README deploys, is still linted against all three (``regions=LINT_REGIONS`` in
tests/infra/test_gates.py), so a property or value missing in one region shows up there. cfn-lint's own setup
(rules and schemas) is loaded once per process and cached; the cost is the validation of each resource, so one call
over several templates would save nothing.

Errors (E) and warnings (W) count, as the ``cfn-lint`` command reports by default, with experimental rules on;
informational rules (I) are advice. W3005 (CDK's explicit DependsOn from a function to its role, already implied by
the GetAtt) is CDK's own, not ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

LINT_REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")
_PRIMARY = LINT_REGIONS[:1]
_IGNORED = frozenset({"W3005"})


def cfn_lint_findings(template: str, *, ignored: Iterable[str] = (), regions: Sequence[str] = _PRIMARY) -> list[str]:
    """``["<rule> <message>", ...]``: the template's E and W findings linted against ``regions``, and every resource
    type missing from one of :data:`LINT_REGIONS`; empty when it is clean."""
    from cfnlint.api import ManualArgs, lint

    skip = _IGNORED | set(ignored)
    matches = lint(template, config=ManualArgs(include_experimental=True, regions=list(regions)))
    findings = [f"{m.rule.id} {m.message}" for m in matches if m.rule.id[:1] in ("E", "W") and m.rule.id not in skip]
    return findings + _types_missing_in_a_region(template)


def _types_missing_in_a_region(template: str) -> list[str]:
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER
    from cfnlint.schema.manager import ResourceNotFoundError

    types = {resource["Type"] for resource in json.loads(template).get("Resources", {}).values()}
    missing = []
    for region in LINT_REGIONS:
        for cfn_type in sorted(t for t in types if not t.startswith("Custom::") and "::" in t):
            try:
                PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, cfn_type)
            except ResourceNotFoundError:
                missing.append(f"{cfn_type} does not exist in {region}")
    return missing
