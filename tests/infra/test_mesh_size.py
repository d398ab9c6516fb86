"""Any mesh size (issue 19 item 3): a manifest of 200 actors synthesizes (cdk-nag included) under every CloudFormation
limit, the actors split across nested stacks, counted stack by stack; the example mesh stays in one stack.

Limits (CloudFormation quotas): 500 resources, 200 parameters, 200 outputs per stack, 1 MB template body (deployed
from S3); IAM: 10,240 bytes of inline policy per role.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk_nag import AwsSolutionsChecks

from asya_cdk import AsyaMesh
from asya_cdk.mesh import DEFAULT_ACTORS_PER_STACK, INLINE_ACTORS
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
ACTORS = 200
MAX_RESOURCES = 500
MAX_PARAMETERS = 200
MAX_OUTPUTS = 200
MAX_TEMPLATE_BYTES = 1_000_000
MAX_ROLE_POLICY_BYTES = 10_240


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[AsyaMesh, dict[str, dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("big-mesh")
    names = [f"a{i:03d}" for i in range(ACTORS)]
    manifest = {
        "namespace": "big",
        "actors": {name: {"handler": "text.normalize", "code": str(REPO / "functions")} for name in names},
        "flows": {"all": {"route": names[:10]}},
    }
    path = directory / "asya.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    app = cdk.App(outdir=str(directory / "out"), analytics_reporting=False)
    stack = cdk.Stack(app, "Big", env=cdk.Environment(region="us-east-1"))
    mesh = AsyaMesh(stack, "Default", manifest=path)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # an unacknowledged finding fails the synth
    assembly = app.synth()
    templates = {
        artifact.stack_name: json.loads(Path(artifact.template_full_path).read_text(encoding="utf-8"))
        for artifact in assembly.stacks
    }
    out = directory / "out"
    for nested in out.glob("*.nested.template.json"):
        templates[nested.name] = json.loads(nested.read_text(encoding="utf-8"))
    return mesh, templates


def test_200_actors_split_across_nested_stacks(big: tuple[AsyaMesh, dict[str, dict[str, Any]]]) -> None:
    mesh, templates = big
    deployed = ACTORS + 2  # x-sink, x-sump
    assert len(mesh.actors) == deployed
    assert len(mesh.actor_stacks) == -(-deployed // DEFAULT_ACTORS_PER_STACK)
    assert len(templates) == 1 + len(mesh.actor_stacks)
    functions = sum(
        1 for t in templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    )
    assert functions == deployed + 3  # the gateway's two (main, streams) and the backstop


@pytest.mark.parametrize(
    ("section", "limit"), [("Resources", MAX_RESOURCES), ("Parameters", MAX_PARAMETERS), ("Outputs", MAX_OUTPUTS)]
)
def test_every_stack_is_under_the_cloudformation_limits(
    big: tuple[AsyaMesh, dict[str, dict[str, Any]]], section: str, limit: int
) -> None:
    _, templates = big
    counts = {name: len(t.get(section, {})) for name, t in templates.items()}
    assert max(counts.values()) <= limit, counts
    assert all(len(json.dumps(t)) < MAX_TEMPLATE_BYTES for t in templates.values())


def test_every_role_policy_is_under_the_iam_size_limit(big: tuple[AsyaMesh, dict[str, dict[str, Any]]]) -> None:
    """The queue wildcard of the matrix keeps an actor's policy independent of the mesh's size."""
    _, templates = big
    sizes = [
        len(json.dumps(r["Properties"]["PolicyDocument"], separators=(",", ":")))
        for t in templates.values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
    ]
    assert sizes and max(sizes) < MAX_ROLE_POLICY_BYTES


def test_the_example_mesh_keeps_its_actors_in_one_stack(example_synth: SynthesizedMesh) -> None:
    """Below INLINE_ACTORS the actors stay in the stack, with the logical ids of earlier versions."""
    assert len(example_synth.built.stack.actors) <= INLINE_ACTORS
    assert example_synth.of_type("AWS::CloudFormation::Stack") == {}
    assert "normalizeQueue2ECD6BE5" in example_synth.resources or any(
        key.startswith("normalizeQueue") for key in example_synth.resources
    )
    assert len(example_synth.resources) <= MAX_RESOURCES


def test_cfn_lint_accepts_the_split_stacks(big: tuple[AsyaMesh, dict[str, dict[str, Any]]]) -> None:
    from cfnlint.api import lint_all

    _, templates = big
    (nested_name, *_) = sorted(name for name in templates if name.endswith(".nested.template.json"))
    for name in ("Big", nested_name):
        matches = lint_all(json.dumps(templates[name]))
        # W3005: CDK's explicit DependsOn from a function to its role, already implied by the GetAtt
        findings = [f"{m.rule.id} {m.message}" for m in matches if m.rule.id[:1] in "EW" and m.rule.id != "W3005"]
        assert findings == [], name
