"""A declared capacity target at synthesis (docs/capacity.md): the derived settings land in the template, and a
target the account's default quotas cannot serve is refused naming the quotas to raise. Two syntheses of the example
mesh with a one-flow mix (the 1,000/s one shared by the two tests that read it, which only read its templates); the
refusal comes before any construct is built."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya.envnames import ENV
from asya_cdk.errors import DeploymentError
from asya_cdk.testing import SynthesizedMesh, synthesize_mesh
from tests.cfn import cfn_lint_findings

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]


def _example(capacity: Mapping[str, Any], quotas: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The example manifest with ``capacity`` (its one compiled flow left out: its source lives beside asya.yaml)."""
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    data["flows"] = {name: flow for name, flow in data["flows"].items() if "source" not in flow}
    for actor in data["actors"].values():
        actor.setdefault("code", str(REPO / "functions"))
    data["capacity"] = dict(capacity)
    if quotas:
        data.setdefault("deployment", {})["quotas"] = dict(quotas)
    return data


@pytest.fixture(scope="module")
def target_1000(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    """The example mesh with a 1,000 tasks/s target, synthesized once for the module."""
    directory = tmp_path_factory.mktemp("capacity-1000")
    path = directory / "asya.yaml"
    data = _example({"target_rate": 1000, "mix": {"text-pipeline": 1.0}})
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return synthesize_mesh(path, repo_root=REPO, outdir=directory / "out")


def test_target_1000_derives_throttle_concurrency_warm_throughput_and_retry_after(target_1000: SynthesizedMesh) -> None:
    mesh = target_1000
    stage = next(iter(mesh.of_type("AWS::ApiGateway::Stage").values()))["Properties"]
    settings = stage["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 1250
    assert settings["ThrottlingBurstLimit"] == 2500

    table = next(iter(mesh.of_type("AWS::DynamoDB::Table").values()))["Properties"]
    assert table["WarmThroughput"]["WriteUnitsPerSecond"] >= 10_000  # 8 write units per task, measured

    caps = {
        res["Properties"]["FunctionName"]["Ref"]: res["Properties"].get("ScalingConfig", {}).get("MaximumConcurrency")
        for res in mesh.of_type("AWS::Lambda::EventSourceMapping").values()
    }
    assert sorted(c for c in caps.values() if c is not None and c > 100) == [260, 260, 260]

    retry = [
        res["Properties"]["Environment"]["Variables"].get(ENV.retry_after)
        for res in mesh.of_type("AWS::Lambda::Function").values()
        if ENV.retry_after in res["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert retry and set(retry) == {"2"}
    shards = {
        res["Properties"]["Environment"]["Variables"][ENV.index_shards]
        for res in mesh.of_type("AWS::Lambda::Function").values()
        if ENV.index_shards in res["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert shards == {"8"}  # 1,000 creations/s fit eight partitions of 1,000 WCU with headroom and skew


def test_target_10000_with_default_quotas_is_refused_naming_the_quotas(
    write_manifest: Callable[[Mapping[str, Any]], Path], tmp_path: Path
) -> None:
    path = write_manifest(_example({"target_rate": 10_000, "mix": {"text-pipeline": 1.0}}))
    with pytest.raises(DeploymentError) as caught:
        synthesize_mesh(path, repo_root=REPO, outdir=tmp_path / "out")
    message = str(caught.value)
    assert "capacity.target_rate 10000" in message
    assert "deployment.quotas.lambda_concurrency:" in message
    assert "deployment.quotas.dynamodb_table_wru:" in message


def test_target_10000_with_raised_quotas_provisions_pollers_and_32_shards(
    write_manifest: Callable[[Mapping[str, Any]], Path], tmp_path: Path
) -> None:
    quotas = {"lambda_concurrency": 8559, "dynamodb_table_wru": 125_000, "apigw_account_rps": 12_500}
    path = write_manifest(_example({"target_rate": 10_000, "mix": {"text-pipeline": 1.0}}, quotas))
    mesh = synthesize_mesh(path, repo_root=REPO, outdir=tmp_path / "out")

    pollers = [
        res["Properties"]["ProvisionedPollerConfig"]
        for res in mesh.of_type("AWS::Lambda::EventSourceMapping").values()
        if "ProvisionedPollerConfig" in res["Properties"]
    ]
    assert pollers == [{"MinimumPollers": 200, "MaximumPollers": 260}] * 3
    assert not any(
        "ProvisionedPollerConfig" in res["Properties"] and "ScalingConfig" in res["Properties"]
        for res in mesh.of_type("AWS::Lambda::EventSourceMapping").values()
    )
    table = next(iter(mesh.of_type("AWS::DynamoDB::Table").values()))["Properties"]
    assert table["WarmThroughput"] == {"WriteUnitsPerSecond": 100_000, "ReadUnitsPerSecond": 37_500}
    shards = {
        res["Properties"]["Environment"]["Variables"][ENV.index_shards]
        for res in mesh.of_type("AWS::Lambda::Function").values()
        if ENV.index_shards in res["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert shards == {"32"}
    template = (mesh.outdir / f"{mesh.built.stack.artifact_id}.template.json").read_text(encoding="utf-8")
    assert cfn_lint_findings(template, ignored=("W3005",)) == []  # the overrides are valid CloudFormation


def test_gw_ovl_7_a_declared_target_gives_the_gateway_its_drain_rates_from_the_model(
    target_1000: SynthesizedMesh,
) -> None:
    """Admission needs each actor's modelled drain rate: synth derives it from the declared target (the rate at
    which the model says the actor's event source breaks, so at least the target) and hands it to both gateway
    functions."""
    mesh = target_1000
    found = [
        res["Properties"]["Environment"]["Variables"]["ASYA_ADMISSION_DRAIN_RATES"]
        for res in mesh.of_type("AWS::Lambda::Function").values()
        if "ASYA_ADMISSION_DRAIN_RATES" in res["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert len(found) == 2 and found[0] == found[1]  # the gateway and its stream function
    rates = json.loads(found[0])
    assert {"normalize", "analyze", "summarize"} <= set(rates)
    assert all(1000 <= rates[actor] <= 1000 * 1.25 * 1.1 for actor in ("normalize", "analyze", "summarize"))
