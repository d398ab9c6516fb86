"""X-Ray tracing from the manifest (P-TRACE-3): ``tracing: true`` turns on Lambda active tracing, the X-Ray write
permissions and ``ASYA_TRACING=true``; off, the function has neither. One traced mesh is synthesized with cdk-nag;
the untraced case is the repository's example mesh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from asya_cdk.testing import SynthesizedMesh, synthesize_mesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}

MANIFEST: dict[str, Any] = {
    "namespace": "traced",
    "defaults": {"tracing": True},
    "actors": {
        "pay": {"handler": "text.normalize", "code": str(REPO / "functions")},
        "ship": {"handler": "text.normalize", "code": str(REPO / "functions"), "tracing": False},
    },
    "flows": {"order": {"route": ["pay", "ship"]}},
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    directory = tmp_path_factory.mktemp("cdk-traced")
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST), encoding="utf-8")
    return synthesize_mesh(manifest, repo_root=REPO, outdir=directory / "cdk.out")


def _function(synth: SynthesizedMesh, actor: str) -> dict[str, Any]:
    (fn,) = [
        res["Properties"]
        for res in synth.of_type("AWS::Lambda::Function").values()
        if res["Properties"].get("Environment", {}).get("Variables", {}).get("ASYA_ACTOR") == actor
    ]
    return fn


def _role_actions(synth: SynthesizedMesh, actor: str) -> set[str]:
    role = _function(synth, actor)["Role"]["Fn::GetAtt"][0]
    actions: set[str] = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if role in {r["Ref"] for r in policy["Properties"]["Roles"]}:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                found = statement["Action"]
                actions.update([found] if isinstance(found, str) else found)
    return actions


@pytest.mark.parametrize("actor", ["pay", "x-sink", "x-sump"])
def test_p_trace_3_traced_actor_gets_active_tracing_xray_permissions_and_asya_tracing(
    traced: SynthesizedMesh, actor: str
) -> None:
    fn = _function(traced, actor)
    assert fn["TracingConfig"] == {"Mode": "Active"}
    assert fn["Environment"]["Variables"]["ASYA_TRACING"] == "true"
    assert _role_actions(traced, actor) >= XRAY_ACTIONS


def test_p_trace_3_an_actor_opting_out_of_defaults_tracing_is_not_traced(traced: SynthesizedMesh) -> None:
    fn = _function(traced, "ship")
    assert "TracingConfig" not in fn
    assert "ASYA_TRACING" not in fn["Environment"]["Variables"]
    assert not XRAY_ACTIONS & _role_actions(traced, "ship")


@pytest.mark.parametrize("actor", ["normalize", "analyze", "summarize", "x-sink", "x-sump"])
def test_p_trace_3_tracing_is_off_by_default(example_synth: SynthesizedMesh, actor: str) -> None:
    fn = _function(example_synth, actor)
    assert "TracingConfig" not in fn
    assert "ASYA_TRACING" not in fn["Environment"]["Variables"]
    assert not XRAY_ACTIONS & _role_actions(example_synth, actor)


def test_p_trace_3_no_function_of_an_untraced_mesh_may_write_to_x_ray(example_synth: SynthesizedMesh) -> None:
    for fn in example_synth.of_type("AWS::Lambda::Function").values():
        assert "TracingConfig" not in fn["Properties"]
    for policy in example_synth.of_type("AWS::IAM::Policy").values():
        assert "xray:" not in str(policy["Properties"]["PolicyDocument"])


def test_cdk_nag_passes_for_a_traced_mesh(traced: SynthesizedMesh) -> None:
    report = traced.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []
