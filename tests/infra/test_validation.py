"""Deployment validation: readable errors before anything is created or built.

Spec: GATEWAY GW-AUTH-6; PROTOCOL P-MAN-1 (errors name the field and the value), P-NAME-5.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from pydantic import ValidationError

from asya.manifest import DeployedActor
from asya_cdk import Actor, BuiltApp, DeploymentError, DeploySettings, SourceLayout, crew_handler
from asya_cdk.testing import build_mesh_app

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]

WriteManifest = Callable[[Mapping[str, Any]], Path]


def build(manifest: Path, outdir: Path) -> BuiltApp:
    return build_mesh_app(manifest, repo_root=REPO, outdir=outdir)


def minimal_manifest(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "namespace": "infra",
        "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
    }
    data.update(extra)
    return data


def test_gw_auth_6_mode_none_is_refused_without_allow_unauthenticated(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    path = write_manifest(minimal_manifest(gateway={"auth": {"mode": "none"}}))
    with pytest.raises(DeploymentError) as info:
        build(path, tmp_path / "out")
    message = str(info.value)
    assert "gateway.auth.mode" in message
    assert "'none'" in message
    assert "allow_unauthenticated: true" in message


def test_gw_edge_1_jwt_mode_verifies_at_the_edge_too(write_manifest: WriteManifest, tmp_path: Path) -> None:
    """GW-EDGE-1 (R3): under jwt the methods are CUSTOM (the edge authorizer) but the public ones and the console's
    assets (GW-AUTH-2); the app verifies again (GW-AUTH-5). tests/infra/test_edge_auth.py asserts the details."""
    auth = {"mode": "jwt", "jwks_url": "https://idp.example/jwks", "issuer": "https://idp.example", "audience": "asya"}
    path = write_manifest(minimal_manifest(gateway={"auth": auth}))
    built = build(path, tmp_path / "out")
    methods = [node for node in built.stack.node.find_all() if isinstance(node, apigw.CfnMethod)]
    assert {m.authorization_type for m in methods} == {"NONE", "CUSTOM"}
    assert sum(m.authorization_type == "NONE" for m in methods) == 6  # 4 public routes, the console and below it


def test_gw_auth_6_mode_none_with_allow_unauthenticated_deploys_open_methods(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    path = write_manifest(minimal_manifest(gateway={"auth": {"mode": "none", "allow_unauthenticated": True}}))
    built = build(path, tmp_path / "out")
    methods = [node for node in built.stack.node.find_all() if isinstance(node, apigw.CfnMethod)]
    # the REST routes, /mcp and /a2a (issue 17), the agent cards, and the stream routes the 128 MB stream function
    # serves (issue 27: the SSE routes, /mcp and /a2a get methods of their own)
    assert len(methods) == 20
    assert {m.authorization_type for m in methods} == {"NONE"}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("ASYA_TABLE", "is set by the deployment"),
        ("POWERTOOLS_SERVICE_NAME", "is set by the deployment"),
        ("AWS_REGION", "is reserved by AWS Lambda"),
    ],
)
def test_env_map_may_not_redefine_deployment_variables(
    write_manifest: WriteManifest, tmp_path: Path, key: str, reason: str
) -> None:
    data = minimal_manifest()
    data["actors"]["echo"]["env"] = {key: "x"}
    with pytest.raises(DeploymentError, match=reason) as info:
        build(write_manifest(data), tmp_path / "out")
    assert f"actors.echo.env.{key}" in str(info.value)


def test_missing_code_directory_names_the_actor(write_manifest: WriteManifest, tmp_path: Path) -> None:
    data = minimal_manifest()
    data["actors"]["echo"]["code"] = "does-not-exist/"
    with pytest.raises(DeploymentError, match=r"actors\.echo\.code: directory .*does-not-exist"):
        build(write_manifest(data), tmp_path / "out")


def _deployed(**overrides: Any) -> DeployedActor:
    fields: dict[str, Any] = {
        "name": "echo",
        "crew": False,
        "handler": "text.normalize",
        "code_dir": REPO / "functions",
        "memory": 256,
        "timeout": 30.0,
        "batch_size": 1,
        "max_concurrency": None,
        "max_receive_count": 5,
        "env": {},
    }
    fields.update(overrides)
    return DeployedActor(**fields)


def _actor(actor: DeployedActor, *, namespace: str = "infra") -> Actor:
    stack = cdk.Stack(cdk.App())
    return Actor(
        stack,
        actor.name,
        namespace=namespace,
        actor=actor,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        handler="index.handler",
        runtime=lambda_.Runtime.PYTHON_3_14,
        layers=[],
        environment={},
    )


@pytest.mark.parametrize("value", [1, 1001])
def test_max_concurrency_outside_sqs_range_is_refused_by_the_manifest_model(value: int) -> None:
    """Issue 26 item 6: the SQS event source's MaximumConcurrency range (2..1000) lives in asya.manifest only."""
    with pytest.raises(ValidationError, match=r"max_concurrency"):
        _deployed(max_concurrency=value)


def test_p_name_5_actor_rejects_names_over_the_sqs_limit() -> None:
    with pytest.raises(DeploymentError, match="over the SQS limit of 80"):
        _actor(_deployed(), namespace="n" * 70)


def test_actor_exposes_its_resources() -> None:
    actor = _actor(_deployed(max_concurrency=2))
    assert actor.name == "echo"
    assert actor.queue.node.scope is actor
    assert actor.dlq.node.scope is actor
    assert actor.function.node.scope is actor
    assert actor.dlq_alarm.node.scope is actor


def test_unknown_crew_actor_has_no_handler() -> None:
    assert crew_handler("x-sink") == "asya_crew.sink.lambda_handler"
    assert crew_handler("x-pause") == "asya_crew.pause.lambda_handler"
    assert crew_handler("x-resume") == "asya_crew.resume.lambda_handler"
    assert crew_handler("x-fanin-echo") == "asya_crew.aggregator.lambda_handler"
    with pytest.raises(DeploymentError, match="crew actor 'x-deadline' has no Lambda handler"):
        crew_handler("x-deadline")


def test_settings_from_context() -> None:
    settings = DeploySettings.from_context({"asya:lwaLayerVersion": "26"}, {"CDK_DEFAULT_REGION": "eu-west-1"})
    assert settings.lwa_layer_version == 26
    assert settings.region == "eu-west-1"
    assert settings.runtime is None  # the manifest's deployment.python_version, else AsyaMesh's default (3.14)
    runtime = DeploySettings.from_context({"asya:pythonVersion": "3.13"}, {}).runtime
    assert runtime is not None and runtime.name == "python3.13"
    assert DeploySettings.from_context({"asya:region": "ap-south-1"}, {"CDK_DEFAULT_REGION": "x"}).region == (
        "ap-south-1"
    )
    assert DeploySettings.from_context({}, {}).region == "us-east-1"


@pytest.mark.parametrize(
    ("context", "match"),
    [
        ({"asya:pythonVersion": "3.9"}, r"asya:pythonVersion: unsupported Python version '3\.9'"),
        ({"asya:lwaLayerVersion": "latest"}, "asya:lwaLayerVersion: expected an integer, got 'latest'"),
        ({"asya:lwaLayerVersion": 0}, "asya:lwaLayerVersion: layer version must be >= 1"),
    ],
)
def test_settings_reject_bad_context(context: dict[str, object], match: str) -> None:
    with pytest.raises(DeploymentError, match=match):
        DeploySettings.from_context(context, {})


def test_source_layout_names_the_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "layers" / "sidecar" / "python" / "asya").mkdir(parents=True)
    (tmp_path / "crew" / "asya_crew").mkdir(parents=True)
    with pytest.raises(DeploymentError, match="the gateway package is missing: expected a directory at"):
        SourceLayout.from_repo(tmp_path).validate()


def test_p_pause_1_a_route_through_x_pause_synthesizes_x_pause_and_x_resume(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    path = write_manifest(minimal_manifest(flows={"review": {"route": ["echo", "x-pause", "echo"]}}))
    built = build(path, tmp_path / "out")
    handlers = {
        node.handler
        for node in built.stack.node.find_all()
        if isinstance(node, lambda_.CfnFunction) and isinstance(node.handler, str)
    }
    assert {"asya_crew.pause.lambda_handler", "asya_crew.resume.lambda_handler"} <= handlers


def test_gw_edge_6_a_method_throttle_naming_no_method_is_refused_with_the_resources(
    write_manifest: WriteManifest, tmp_path: Path
) -> None:
    edge = {"throttle": {"methods": {"/api/v2/tasks/POST": {"rate_limit": 1}}}}
    path = write_manifest(minimal_manifest(gateway={"edge": edge}))
    with pytest.raises(DeploymentError) as info:
        build(path, tmp_path / "out")
    message = str(info.value)
    assert "gateway.edge.throttle.methods: ['/api/v2/tasks/POST'] name no method of the API" in message
    assert "'/api/v1/mesh'" in message
