"""Any mesh size (issue 19 item 3, issue 26 items 1 to 3): meshes of 5, 36, 37 and 200 actors, and 37 with 4 removed
from the middle, synthesized under ``deployment.placement: nested``; every resource with a fixed physical name (queues,
DLQs, the table, the dashboards) keeps its stack and logical id from one size to the next, so growing or shrinking a
mesh never asks CloudFormation to create a name that still exists. The comparison is symmetric, so each pair is a
growth and a shrink: 37 and 200 cross the dashboard split (1 and 6 dashboards of at most 40 actors), and the removal
from the middle shifts the position of every later actor, which an id derived from a position would follow. (The
removal was 20 from a 200-actor mesh; 4 from 37 shifts later actors in their nested stacks the same way, and saves
a 180-actor synthesis.) The 200-actor mesh passes cdk-nag, cfn-lint and
the limits check (:mod:`asya_cdk.limits`), its dashboards split under CloudWatch's widget limit. Under
``placement: stack`` (the default) 36 actors stay in the stack with the ids of 5, and 37 are refused at synthesis.

Limits (CloudFormation quotas): 500 resources, 200 parameters, 200 outputs per stack, 1 MB template body (deployed
from S3); IAM: 10,240 characters of inline policy per role; CloudWatch: 500 widgets per dashboard.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk_nag import AwsSolutionsChecks

from asya.envnames import ENV
from asya.manifest.blocks import MAX_STACK_ACTORS
from asya_cdk import AsyaMesh, DeploymentError
from asya_cdk.limits import MAX_DASHBOARD_WIDGETS, LimitReport, check_assembly
from asya_cdk.placement import MAX_ACTORS_PER_STACK, actor_bucket
from asya_cdk.testing import SynthesizedMesh

# one xdist worker takes the whole module, so each size is synthesized once per run rather than once per worker
from tests.cfn import cfn_lint_findings

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("mesh_size")]

REPO = Path(__file__).resolve().parents[2]
ACTORS = 200
MAX_RESOURCES = 500
MAX_PARAMETERS = 200
MAX_OUTPUTS = 200
MAX_TEMPLATE_BYTES = 1_000_000
MAX_ROLE_POLICY_BYTES = 10_240
#: The property that gives a resource of each type a fixed physical name.
NAME_PROPERTIES = {
    "AWS::SQS::Queue": "QueueName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Logs::LogGroup": "LogGroupName",
}
#: 37 actors with 4 taken out of the middle.
REMOVED = {f"a{i:03d}" for i in range(16, 20)}


@dataclass(frozen=True)
class Synth:
    mesh: AsyaMesh
    templates: dict[str, dict[str, Any]]
    outdir: Path
    seconds: float
    limits: LimitReport

    def named(self) -> dict[str, tuple[str, str]]:
        """Every fixed physical name -> (the template holding it, its logical id)."""
        found: dict[str, tuple[str, str]] = {}
        for template_name, template in self.templates.items():
            for logical_id, resource in template["Resources"].items():
                prop = NAME_PROPERTIES.get(resource["Type"])
                value = resource.get("Properties", {}).get(prop) if prop else None
                if value is not None:
                    key = json.dumps(value, sort_keys=True)
                    assert key not in found, f"{key} twice"
                    found[key] = (template_name, logical_id)
        return found


def _manifest(names: list[str], placement: str | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "namespace": "big",
        "actors": {name: {"handler": "text.normalize", "code": str(REPO / "functions")} for name in names},
        "flows": {"all": {"route": names[:3]}},
    }
    if placement is not None:
        manifest["deployment"] = {"placement": placement}
    return manifest


def _synth(directory: Path, names: list[str], placement: str | None, *, nag: bool = False) -> Synth:
    path = directory / "asya.yaml"
    path.write_text(yaml.safe_dump(_manifest(names, placement)), encoding="utf-8")
    started = time.monotonic()
    app = cdk.App(outdir=str(directory / "out"), analytics_reporting=False)
    stack = cdk.Stack(app, "Big", env=cdk.Environment(region="us-east-1"))
    mesh = AsyaMesh(stack, "Default", manifest=path)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # an unacknowledged finding fails the synth
    assembly = app.synth()
    templates = {
        artifact.stack_name: json.loads(Path(artifact.template_full_path).read_text(encoding="utf-8"))
        for artifact in assembly.stacks
    }
    for nested in (directory / "out").glob("*.nested.template.json"):
        templates[nested.name] = json.loads(nested.read_text(encoding="utf-8"))
    return Synth(
        mesh=mesh,
        templates=templates,
        outdir=directory / "out",
        seconds=time.monotonic() - started,
        limits=check_assembly(assembly),
    )


@pytest.fixture(scope="module")
def synths(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Synth]]:
    """One synthesis per size, made when a test first asks for it; the 200-actor one with cdk-nag."""
    made: dict[str, Synth] = {}
    sizes: dict[str, tuple[list[str], str | None, bool]] = {
        "nested-5": ([f"a{i:03d}" for i in range(5)], "nested", False),
        "nested-36": ([f"a{i:03d}" for i in range(36)], "nested", False),
        "nested-37": ([f"a{i:03d}" for i in range(37)], "nested", False),
        "nested-200": ([f"a{i:03d}" for i in range(ACTORS)], "nested", True),
        "nested-33": ([f"a{i:03d}" for i in range(37) if f"a{i:03d}" not in REMOVED], "nested", False),
        "stack-5": ([f"a{i:03d}" for i in range(5)], None, False),
        "stack-34": ([f"a{i:03d}" for i in range(MAX_STACK_ACTORS - 2)], None, False),
    }

    def get(key: str) -> Synth:
        if key not in made:
            names, placement, nag = sizes[key]
            made[key] = _synth(tmp_path_factory.mktemp(key), names, placement, nag=nag)
        return made[key]

    yield get
    print("\nsynthesis seconds: " + ", ".join(f"{key} {synth.seconds:.0f}" for key, synth in made.items()))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("nested-5", "nested-36"),
        ("nested-36", "nested-37"),
        ("nested-37", "nested-200"),
        ("nested-37", "nested-33"),
        ("nested-5", "nested-200"),
        ("stack-5", "stack-34"),
    ],
)
def test_growing_or_shrinking_never_moves_a_named_resource(
    synths: Callable[[str], Synth], before: str, after: str
) -> None:
    """Issue 26 item 1: every fixed name present in both synths has the same template and logical id."""
    old, new = synths(before).named(), synths(after).named()
    common = set(old) & set(new)
    assert len(common) >= 2 * 5 + 1  # at least five actors' queue and DLQ, and the table
    moved = {name: (old[name], new[name]) for name in common if old[name] != new[name]}
    assert moved == {}


def test_an_actor_goes_where_its_name_hashes(synths: Callable[[str], Synth]) -> None:
    """The nested stack of an actor depends on its name only (stable from the first deployment)."""
    mesh = synths("nested-37").mesh
    for name, actor in mesh.actors.items():
        assert cdk.Stack.of(actor).node.id == f"Actors{actor_bucket(name, 8)}"


def test_placement_stack_refuses_a_mesh_over_its_size(tmp_path: Path) -> None:
    """37 deployed actors in the stack would exceed 500 resources: refused at synthesis with the fix, never moved."""
    path = tmp_path / "asya.yaml"
    path.write_text(yaml.safe_dump(_manifest([f"a{i:03d}" for i in range(MAX_STACK_ACTORS - 1)], None)), "utf-8")
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    with pytest.raises(DeploymentError) as info:
        AsyaMesh(stack, "Default", manifest=path)
    assert f"deployment.placement: 'stack' holds at most {MAX_STACK_ACTORS} deployed actors" in str(info.value)
    assert "this mesh has 37; set deployment.placement: nested" in str(info.value)


def test_a_crowded_nested_stack_is_refused_with_its_actors(tmp_path: Path) -> None:
    names = [f"a{i:03d}" for i in range(MAX_ACTORS_PER_STACK + 1)]
    manifest = {**_manifest(names, "nested"), "deployment": {"placement": "nested", "actor_stacks": 1}}
    path = tmp_path / "asya.yaml"
    path.write_text(yaml.safe_dump(manifest), "utf-8")
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    crowded = rf"nested stack Actors0 would hold {MAX_ACTORS_PER_STACK + 3} actors, over {MAX_ACTORS_PER_STACK} "
    with pytest.raises(DeploymentError, match=crowded + r".*a000, a001"):
        AsyaMesh(stack, "Default", manifest=path)


def test_200_actors_split_across_nested_stacks(synths: Callable[[str], Synth]) -> None:
    big = synths("nested-200")
    deployed = ACTORS + 2  # x-sink, x-sump
    assert len(big.mesh.actors) == deployed
    assert len(big.mesh.actor_stacks) == 8
    assert len(big.templates) == 1 + len(big.mesh.actor_stacks)
    functions = sum(
        1 for t in big.templates.values() for r in t["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    )
    assert functions == deployed + 3  # the gateway's two (main, streams) and the backstop


@pytest.mark.parametrize(
    ("section", "limit"), [("Resources", MAX_RESOURCES), ("Parameters", MAX_PARAMETERS), ("Outputs", MAX_OUTPUTS)]
)
def test_every_stack_is_under_the_cloudformation_limits(
    synths: Callable[[str], Synth], section: str, limit: int
) -> None:
    templates = synths("nested-200").templates
    counts = {name: len(t.get(section, {})) for name, t in templates.items()}
    assert max(counts.values()) <= limit, counts
    assert all(len(json.dumps(t)) < MAX_TEMPLATE_BYTES for t in templates.values())


def test_every_role_policy_is_under_the_iam_size_limit(synths: Callable[[str], Synth]) -> None:
    """The queue wildcard of the matrix keeps an actor's policy independent of the mesh's size."""
    sizes = [
        len(json.dumps(r["Properties"]["PolicyDocument"], separators=(",", ":")))
        for t in synths("nested-200").templates.values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
    ]
    assert sizes and max(sizes) < MAX_ROLE_POLICY_BYTES


def test_the_limits_check_passes_the_200_actor_mesh(synths: Callable[[str], Synth]) -> None:
    """Issue 26 item 2: no limit of any template is exceeded, and 204 roles raise no warning."""
    assert synths("nested-200").limits == LimitReport()


def test_each_function_alarm_lives_with_its_actor(synths: Callable[[str], Synth]) -> None:
    """Issue 26 item 7: under placement 'nested' an actor's errors-and-throttles alarm goes into its nested stack,
    so the stack of the mesh does not grow with the actors."""
    big = synths("nested-200")
    for actor in big.mesh.actors.values():
        alarm = big.mesh.observability.operator.function_alarms[actor.name]
        assert cdk.Stack.of(alarm) is cdk.Stack.of(actor)
    for name, template in big.templates.items():
        types = [r["Type"] for r in template["Resources"].values()]
        if name.endswith(".nested.template.json"):
            assert types.count("AWS::CloudWatch::Alarm") == 3 * types.count("AWS::Lambda::Function")


def test_dashboards_split_under_the_widget_limit_and_named_per_region(synths: Callable[[str], Synth]) -> None:
    """Issue 26 item 3: 202 actors take 6 dashboards (2 widgets per actor, 40 actors each), every one well under
    CloudWatch's 500 widgets, named after the region so one namespace can live in two regions."""
    templates = synths("nested-200").templates
    boards = [
        r["Properties"] for r in templates["Big"]["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    names = sorted(b["DashboardName"] for b in boards)
    assert names == ["asya-big-us-east-1", *(f"asya-big-us-east-1-{n}" for n in range(2, 7))]
    for board in boards:
        body = board["DashboardBody"]
        text = body if isinstance(body, str) else "".join(p for p in body["Fn::Join"][1] if isinstance(p, str))
        assert 0 < text.count('"type":') <= MAX_DASHBOARD_WIDGETS
    everything = json.dumps(boards)
    for name in ("a000", "a199", "x-sink", "x-sump"):
        assert f"{name}: queue" in everything


def test_the_example_mesh_keeps_its_actors_in_one_stack(example_synth: SynthesizedMesh) -> None:
    """Under placement 'stack' the actors stay in the stack, with the logical ids of earlier versions. The actors
    are read from the template (each actor's function names it), not from the constructed app: constructing the
    example app again costs a worker that read the synthesis from the cache about 15 s."""
    actors = {
        res["Properties"]["Environment"]["Variables"][ENV.actor]
        for res in example_synth.of_type("AWS::Lambda::Function").values()
        if ENV.actor in res["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert "normalize" in actors and "x-sink" in actors
    assert len(actors) <= MAX_STACK_ACTORS
    # its only nested stack holds the operator alarms (asya_cdk.operator_alarms), never an actor
    assert [key for key in example_synth.of_type("AWS::CloudFormation::Stack") if "OperatorAlarms" not in key] == []
    assert any(key.startswith("normalizeQueue") for key in example_synth.resources)
    assert len(example_synth.resources) <= MAX_RESOURCES


def test_cfn_lint_accepts_the_split_stacks(synths: Callable[[str], Synth]) -> None:
    """The mesh's stack and its smallest actor stack: every actor stack holds the same resources per actor (its
    queue, DLQ, function, role, alarms), so the smallest lints every kind a larger one holds, at a fraction of the
    cost (cfn-lint's time grows with the resources it validates)."""
    templates = synths("nested-200").templates
    nested = [name for name in templates if name.endswith(".nested.template.json") and "Actors" in name]
    assert len(nested) == 8, sorted(templates)
    nested_name = min(nested, key=lambda name: (len(templates[name]["Resources"]), name))
    assert {r["Type"] for r in templates[nested_name]["Resources"].values()} == {
        r["Type"] for name in nested for r in templates[name]["Resources"].values()
    }
    for name in ("Big", nested_name):
        findings = cfn_lint_findings(json.dumps(templates[name]))
        assert findings == [], name
