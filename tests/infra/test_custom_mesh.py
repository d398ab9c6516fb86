"""A mesh exercising the optional settings: max_concurrency, env, resiliency, sink hooks, api_key auth with CORS,
and context overrides (region, Lambda Web Adapter version). SynthesizedMesh once, with cdk-nag.

Spec: PROTOCOL P-MAN-2, P-MAN-4, P-PROC-1, P-ACK-1, P-SINK-6; GATEWAY GW-AUTH-4, GW-GEN-8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya.flowfile import read_flows_file
from asya.manifest import load_manifest
from asya_cdk.testing import SynthesizedMesh, synthesize_mesh
from tests.bigflow import big_flow_source

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]

MANIFEST: dict[str, Any] = {
    "namespace": "shop",
    "defaults": {"timeout": "20s", "batch_size": 2},
    "actors": {
        "pay": {
            "handler": "text.normalize",
            "code": str(REPO / "functions"),
            "memory": 512,
            "max_concurrency": 5,
            "env": {"FOO": "bar"},
            "resiliency": {
                "policies": {"default": {"max_attempts": 2, "initial_delay": "2s"}},
                "rules": [{"errors": ["ValueError"], "policy": "default"}],
            },
        },
        # cdk never imports a handler: the kind record_concurrency needs is checked by `asya synth`'s preflight
        "ship": {
            "handler": "text.normalize",
            "code": str(REPO / "functions"),
            "max_receive_count": 3,
            "record_concurrency": 2,
        },
    },
    "flows": {"order": {"route": ["pay", "ship"]}, "big": {"source": "big.py"}},
    "crew": {"sink_hooks": ["ship"]},
    "gateway": {
        "auth": {"mode": "api_key", "api_key_secret": "asya/keys"},
        "cors_origins": ["https://shop.example.com"],
    },
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    directory = tmp_path_factory.mktemp("cdk-shop")
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST), encoding="utf-8")
    (directory / "big.py").write_text(big_flow_source(first="pay", last="ship"), encoding="utf-8")
    return synthesize_mesh(
        manifest,
        repo_root=REPO,
        outdir=directory / "cdk.out",
        context={"asya:region": "eu-west-1", "asya:lwaLayerVersion": "26"},
    )


def _function_by_actor(synth: SynthesizedMesh, actor: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [
        res["Properties"]
        for res in synth.of_type("AWS::Lambda::Function").values()
        if res["Properties"].get("Environment", {}).get("Variables", {}).get("ASYA_ACTOR") == actor
    ]
    (fn,) = matches
    return fn


def _queue(synth: SynthesizedMesh, name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [
        res["Properties"] for res in synth.of_type("AWS::SQS::Queue").values() if res["Properties"]["QueueName"] == name
    ]
    (props,) = matches
    return props


def test_stack_name_follows_namespace(shop: SynthesizedMesh) -> None:
    assert shop.built.stack.stack_name == "asya-shop"
    assert shop.built.stack.region == "eu-west-1"


def test_p_man_4_sizing_from_defaults(shop: SynthesizedMesh) -> None:
    fn = _function_by_actor(shop, "pay")
    assert fn["Timeout"] == 2 * 20 + 10
    assert fn["MemorySize"] == 512
    assert _queue(shop, "asya-shop-pay")["VisibilityTimeout"] == 50 + 60
    assert _queue(shop, "asya-shop-ship")["RedrivePolicy"]["maxReceiveCount"] == 3


def test_p_man_4_concurrent_records_size_the_timeout_by_rounds(shop: SynthesizedMesh) -> None:
    ship = _function_by_actor(shop, "ship")
    assert ship["Timeout"] == 1 * 20 + 10  # batch 2, both records at once: one round of the 20 s timeout
    assert _queue(shop, "asya-shop-ship")["VisibilityTimeout"] == 30 + 60  # P-MAN-4: timeout + the throttle window
    assert ship["Environment"]["Variables"]["ASYA_RECORD_CONCURRENCY"] == "2"
    assert "ASYA_RECORD_CONCURRENCY" not in _function_by_actor(shop, "pay")["Environment"]["Variables"]


def test_p_ack_1_max_concurrency_and_batch_size_on_the_event_source(shop: SynthesizedMesh) -> None:
    by_batch = {
        json.dumps(res["Properties"].get("ScalingConfig")): res["Properties"]
        for res in shop.of_type("AWS::Lambda::EventSourceMapping").values()
        if res["Properties"]["BatchSize"] == 2
    }
    assert set(by_batch) == {json.dumps({"MaximumConcurrency": 5}), "null"}  # pay, ship
    for props in by_batch.values():
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_p_man_2_env_map_and_resiliency_reach_the_function(shop: SynthesizedMesh) -> None:
    env = _function_by_actor(shop, "pay")["Environment"]["Variables"]
    assert env["FOO"] == "bar"
    assert env["ASYA_ACTOR_TIMEOUT"] == "20"
    manifest = load_manifest(shop.built.stack.manifest.base_dir / "asya.yaml")
    resiliency = manifest.actors["pay"].resiliency
    assert resiliency is not None
    assert json.loads(env["ASYA_RESILIENCY"]) == resiliency.model_dump(mode="json")
    assert "ASYA_RESILIENCY" not in _function_by_actor(shop, "ship")["Environment"]["Variables"]


def test_p_sink_6_sink_hooks_reach_x_sink(shop: SynthesizedMesh) -> None:
    assert _function_by_actor(shop, "x-sink")["Environment"]["Variables"]["ASYA_SINK_HOOKS"] == "ship"


def test_gw_edge_1_api_key_mode_puts_a_cached_request_authorizer_on_x_api_key_before_the_app(
    shop: SynthesizedMesh,
) -> None:
    """Every method but the public ones, the console's assets and CORS preflights is CUSTOM: the client authorizer
    on ``X-API-Key`` (cached 300 s by default), or the reporter one on the producer route (GW-EDGE-2 (R3))."""
    from tests.infra.test_edge_auth import methods

    found = methods(shop)
    assert {m["Integration"]["ResponseTransferMode"] for _, _, m in found} == {"STREAM"}
    sources = set()
    for http_method, path, props in found:
        if props["AuthorizationType"] == "NONE":
            assert http_method == "OPTIONS" or path.startswith(("/console", "/health", "/openapi", "/.well-known"))
            continue
        assert props["AuthorizationType"] == "CUSTOM", (http_method, path)
        authorizer = shop.resources[props["AuthorizerId"]["Ref"]]["Properties"]
        assert (authorizer["Type"], authorizer["AuthorizerResultTtlInSeconds"]) == ("REQUEST", 300)
        sources.add((authorizer["IdentitySource"], http_method == "POST" and path == "/api/v1/mesh/{task_id}/events"))
    assert sources == {("method.request.header.X-API-Key", False), ("method.request.header.X-Asya-Reporter-Key", True)}


def test_gw_auth_4_gateway_may_read_the_api_key_secret(shop: SynthesizedMesh) -> None:
    (gateway,) = [
        (key, res)
        for key, res in shop.of_type("AWS::Lambda::Function").items()
        if res["Properties"]["Handler"] == "run.sh" and not res["Properties"]["Description"].endswith(", streams")
    ]
    role = gateway[1]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for policy in shop.of_type("AWS::IAM::Policy").values()
        if role in {r["Ref"] for r in policy["Properties"]["Roles"]}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    secret = [s for s in statements if "secretsmanager:GetSecretValue" in s["Action"]]
    resources = json.dumps([s["Resource"] for s in secret])
    assert ":secret:asya/keys-??????" in resources
    assert "ReporterKeys" in resources, "and the reporter keys (GW-EDGE-2 (R3))"


def test_lwa_layer_version_and_region_from_context(shop: SynthesizedMesh) -> None:
    (gateway,) = [
        res["Properties"]
        for res in shop.of_type("AWS::Lambda::Function").values()
        if res["Properties"]["Handler"] == "run.sh" and not res["Properties"]["Description"].endswith(", streams")
    ]
    assert "arn:aws:lambda:eu-west-1:753240598075:layer:LambdaAdapterLayerArm64:26" in gateway["Layers"]


def test_cdk_nag_passes_for_api_key_mode(shop: SynthesizedMesh) -> None:
    report = shop.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []


def test_a_flow_program_over_4_kb_ships_in_the_flows_layer(shop: SynthesizedMesh) -> None:
    """Issue 29: a compiled flow whose program is over Lambda's 4 KB environment synthesizes (the limit check is not
    hit): its actors name the file (ASYA_FLOWS_FILE, ASYA_FLOW_NAMES) in the flows layer instead of ASYA_FLOWS."""
    assert shop.limits.errors == ()
    program = load_manifest(shop.outdir.parent / "asya.yaml").flows["big"].program
    assert program is not None and len(json.dumps(program.to_json())) > 4096
    env = _function_by_actor(shop, "pay")["Environment"]["Variables"]
    assert (env["ASYA_FLOWS_FILE"], env["ASYA_FLOW_NAMES"]) == ("asya_flows.json", "big") and "ASYA_FLOWS" not in env
    (layer,) = [
        r for r in shop.of_type("AWS::Lambda::LayerVersion").values() if "flows" in r["Properties"]["Description"]
    ]
    (staged,) = list(shop.outdir.glob("asset.*/python/asya_flows.json"))
    assert json.loads(staged.read_text())["big"] == program.to_json()
    assert layer["Properties"]["CompatibleRuntimes"]
    # the artifact mesh lays the function out as Lambda does (each layer's python directory on the path): it finds
    # the same file by the same name
    from asya_local.artifact.model import read_mesh
    from asya_local.artifact.template import load_assembly

    spec = read_mesh(load_assembly(shop.outdir, endpoint_url="http://127.0.0.1:1"))
    (pay,) = [f for f in spec.functions.values() if f.environment.get("ASYA_ACTOR") == "pay"]
    search = [str(pay.code_dir), *(str(d / "python") for d in pay.layer_dirs)]
    found = read_flows_file(pay.environment["ASYA_FLOWS_FILE"], ["big"], search=search)
    assert found == {"big": program}
