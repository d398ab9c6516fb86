"""Auth at the edge in the template (GW-EDGE-1..6 (R3), docs/deploy.md "Edge auth"): under ``jwt`` a cached TOKEN
authorizer on every non-public method, the public methods and the console's assets open, the producer route under
the reporter authorizer; the reporter keys' secret read by every gateway function; the stage's throttles, WAF
association and custom domain from ``gateway.edge``; readable errors for bad edge settings. One synthesis (cdk-nag
enforced) for the module; the ``api_key`` variant is asserted in test_custom_mesh.py on its mesh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from asya.exceptions import ManifestError
from asya.manifest import parse_manifest
from asya_cdk.testing import SynthesizedMesh, synthesize_mesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Pool1"
WAF_ARN = "arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/asya/0a1b2c3d-0000-4000-8000-000000000001"
CERT_ARN = "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-0000-4000-8000-000000000002"
PUBLIC = {"/health", "/openapi.json", "/.well-known/agent.json", "/.well-known/agent-card.json"}

MANIFEST: dict[str, Any] = {
    "namespace": "edge",
    "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
    "flows": {"echoing": {"route": ["echo"]}},
    "gateway": {
        "auth": {
            "mode": "jwt",
            "jwks_url": f"{ISSUER}/.well-known/jwks.json",
            "issuer": ISSUER,
            "audience": "app-client-1",
            "authorizer_cache_seconds": 120,
            "flow_scopes": {"echoing": ["asya/echo"]},
            "owner_only": True,
        },
        "edge": {
            "throttle": {"rate_limit": 50, "burst_limit": 80, "methods": {"/api/v1/mesh/POST": {"rate_limit": 5}}},
            "waf_web_acl_arn": WAF_ARN,
            "domain": {"name": "api.example.com", "certificate_arn": CERT_ARN, "base_path": "asya"},
        },
    },
}


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    directory = tmp_path_factory.mktemp("cdk-edge")
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST), encoding="utf-8")
    return synthesize_mesh(manifest, repo_root=REPO, outdir=directory / "cdk.out", context={"asya:region": "eu-west-1"})


def _paths(mesh: SynthesizedMesh) -> dict[str, str]:
    """Resource logical id -> API path."""
    resources = mesh.of_type("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path_of(logical: str) -> str:
        if logical not in paths:
            props = resources[logical]["Properties"]
            parent = props["ParentId"]
            prefix = path_of(parent["Ref"]) if "Ref" in parent else ""
            paths[logical] = f"{prefix}/{props['PathPart']}"
        return paths[logical]

    for logical in resources:
        path_of(logical)
    return paths


def methods(mesh: SynthesizedMesh) -> list[tuple[str, str, dict[str, Any]]]:
    """(HTTP method, path, properties) of every API method."""
    paths = _paths(mesh)
    found = []
    for method in mesh.of_type("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        resource = props["ResourceId"]
        path = paths[resource["Ref"]] if "Ref" in resource else "/"
        found.append((props["HttpMethod"], path, props))
    return found


def _authorizer(mesh: SynthesizedMesh, props: dict[str, Any]) -> dict[str, Any]:
    return mesh.resources[props["AuthorizerId"]["Ref"]]["Properties"]


def test_gw_edge_1_every_non_public_method_has_the_cached_token_authorizer(edge: SynthesizedMesh) -> None:
    checked = 0
    for http_method, path, props in methods(edge):
        if (
            path in PUBLIC
            or path.startswith("/console")
            or (http_method, path) == ("POST", "/api/v1/mesh/{task_id}/events")
        ):
            continue
        assert props["AuthorizationType"] == "CUSTOM", (http_method, path)
        authorizer = _authorizer(edge, props)
        assert authorizer["Type"] == "TOKEN"
        assert authorizer["IdentitySource"] == "method.request.header.Authorization"
        assert authorizer["AuthorizerResultTtlInSeconds"] == 120
        assert authorizer["IdentityValidationExpression"].startswith("^Bearer ")
        checked += 1
    assert checked >= 10


def test_gw_edge_1_public_methods_and_the_console_stay_open(edge: SynthesizedMesh) -> None:
    open_ = {(m, p) for m, p, props in methods(edge) if props["AuthorizationType"] == "NONE"}
    assert {("GET", path) for path in PUBLIC} | {("GET", "/console"), ("GET", "/console/{proxy+}")} == open_


def test_gw_edge_2_the_producer_route_takes_the_reporter_authorizer(edge: SynthesizedMesh) -> None:
    (props,) = [p for m, path, p in methods(edge) if (m, path) == ("POST", "/api/v1/mesh/{task_id}/events")]
    authorizer = _authorizer(edge, props)
    assert authorizer["Type"] == "REQUEST"
    assert authorizer["IdentitySource"] == "method.request.header.X-Asya-Reporter-Key"


def test_gw_edge_1_the_authorizer_runs_the_gateways_check_and_reads_the_reporter_secret(edge: SynthesizedMesh) -> None:
    functions = edge.of_type("AWS::Lambda::Function")
    (authorizer,) = [f for f in functions.values() if f["Properties"]["Handler"] == "asya_gateway.authorizer.handler"]
    variables = authorizer["Properties"]["Environment"]["Variables"]
    (secret_id,) = edge.of_type("AWS::SecretsManager::Secret")
    assert variables["ASYA_REPORTER_KEY_SECRET"] == {"Ref": secret_id}
    readers = [
        f for f in functions.values() if "ASYA_REPORTER_KEY_SECRET" in f["Properties"]["Environment"]["Variables"]
    ]
    assert len(readers) == 3, "the main and stream gateway functions and the authorizer"
    granted = [
        p
        for p in edge.of_type("AWS::IAM::Policy").values()
        if any(
            s.get("Resource") == {"Ref": secret_id} and "secretsmanager:GetSecretValue" in s["Action"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    assert len(granted) == 3


def test_gw_edge_6_throttles_waf_and_domain(edge: SynthesizedMesh) -> None:
    (stage,) = edge.of_type("AWS::ApiGateway::Stage").values()
    settings = {s["ResourcePath"]: s for s in stage["Properties"]["MethodSettings"]}
    assert settings["/*"]["ThrottlingRateLimit"] == 50 and settings["/*"]["ThrottlingBurstLimit"] == 80
    assert settings["/~1api~1v1~1mesh"]["HttpMethod"] == "POST"
    assert settings["/~1api~1v1~1mesh"]["ThrottlingRateLimit"] == 5
    (association,) = edge.of_type("AWS::WAFv2::WebACLAssociation").values()
    assert association["Properties"]["WebACLArn"] == WAF_ARN
    (domain,) = edge.of_type("AWS::ApiGateway::DomainName").values()
    assert domain["Properties"]["DomainName"] == "api.example.com"
    assert domain["Properties"]["RegionalCertificateArn"] == CERT_ARN
    assert domain["Properties"]["SecurityPolicy"] == "TLS_1_2"
    (mapping,) = edge.of_type("AWS::ApiGateway::BasePathMapping").values()
    assert mapping["Properties"]["BasePath"] == "asya"


@pytest.mark.parametrize(
    ("edge_settings", "message"),
    [
        ({"waf_web_acl_arn": "arn:aws:waf::123456789012:webacl/x"}, "gateway.edge.waf_web_acl_arn"),
        ({"domain": {"name": "API.Example.com", "certificate_arn": CERT_ARN}}, "gateway.edge.domain.name"),
        ({"domain": {"name": "api.example.com", "certificate_arn": "cert-1"}}, "gateway.edge.domain.certificate_arn"),
        ({"throttle": {"rate_limit": -1}}, "gateway.edge.throttle.rate_limit"),
        ({"throttle": {"methods": {"POST /api/v1/mesh": {}}}}, "gateway.edge.throttle.methods"),
    ],
)
def test_gw_edge_6_bad_edge_settings_are_refused_naming_the_field(edge_settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest({"namespace": "n", "gateway": {"edge": edge_settings}})
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({"mode": "api_key", "api_key_secret": "k", "owner_only": True}, "gateway.auth.owner_only: needs mode 'jwt'"),
        (
            {
                "mode": "jwt",
                "jwks_url": f"{ISSUER}/jwks",
                "issuer": ISSUER,
                "audience": "a",
                "flow_scopes": {"nope": ["s"]},
            },
            "gateway.auth.flow_scopes.nope: no flow 'nope'",
        ),
        ({"mode": "iam", "authorizer_cache_seconds": 7200}, "gateway.auth.authorizer_cache_seconds"),
    ],
)
def test_gw_edge_4_bad_auth_settings_are_refused_naming_the_field(auth: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest({"namespace": "n", "gateway": {"auth": auth}})
    assert message in str(info.value)


def test_gw_edge_1_the_artifact_mesh_reads_the_authorizers_and_would_run_their_function(edge: SynthesizedMesh) -> None:
    """The artifact mesh's model of this assembly: every CUSTOM method's authorizer is a Lambda TOKEN/REQUEST one
    whose function is in the assembly with the authorizer handler (the API front accepts it at start)."""
    from asya_local.artifact.authorizers import check_supported
    from asya_local.artifact.model import read_mesh
    from asya_local.artifact.template import load_assembly

    assembly = load_assembly(
        edge.outdir, region="eu-west-1", account_id="123456789012", endpoint_url="http://127.0.0.1:9"
    )
    spec = read_mesh(assembly)
    custom = [m for m in spec.methods if m.authorization == "CUSTOM"]
    assert custom and spec.secrets
    for method in custom:
        check_supported(method)
        uri = str((method.authorizer or {})["AuthorizerUri"])
        function = uri.split("/functions/", 1)[1].removesuffix("/invocations")
        assert spec.functions[function].handler == "asya_gateway.authorizer.handler"


def test_cfn_lint_is_clean_with_edge_auth_waf_and_domain(edge: SynthesizedMesh) -> None:
    """As every template of the tier (tests/cfn.py): the edge's types exist in each region, and lint clean."""
    from tests.cfn import cfn_lint_findings
    from tests.infra.test_gates import _CFN_LINT_IGNORED, _template_path

    assert cfn_lint_findings(_template_path(edge).read_text(encoding="utf-8"), ignored=_CFN_LINT_IGNORED) == []
