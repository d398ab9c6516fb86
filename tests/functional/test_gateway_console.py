"""The web console's assets and ``GET /api/v1/system/mesh`` over real HTTP against moto (issue 21): allow-listed
files with their content types and a strict CSP, the ``/console`` redirect, 404/405 in the gateway's error format
(GW-GEN-2, GW-GEN-3), ETag revalidation, and auth: the assets are public, the mesh route is not (GW-AUTH-2,
GW-AUTH-4)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from asya.manifest import Manifest
from asya_gateway import GatewayConfig, create_app
from asya_gateway.routes.system import mesh_summary_of
from tests.asgi import asgi_client

pytestmark = pytest.mark.functional

KEY = "functional-key"


@pytest.fixture
def gateway(mesh: Any) -> Callable[..., httpx.Client]:
    clients: list[httpx.Client] = []

    def start(manifest: Manifest | None = None, api_keys: tuple[str, ...] | None = None) -> httpx.Client:
        app = create_app(
            GatewayConfig(api_keys=api_keys),
            manifest=manifest or mesh.manifest,
            sqs=mesh.aws.sqs,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
        )
        client = asgi_client(app)
        clients.append(client)
        return client

    return start


@pytest.fixture
def client(gateway: Callable[..., httpx.Client]) -> Iterator[httpx.Client]:
    with gateway() as http:
        yield http


@pytest.mark.parametrize(
    ("path", "content_type", "marker"),
    [
        ("/console/", "text/html; charset=utf-8", b'<script type="module" src="console.js">'),
        ("/console/index.html", "text/html; charset=utf-8", b"<title>asya console</title>"),
        ("/console/console.js", "text/javascript; charset=utf-8", b"textContent"),
        ("/console/console.css", "text/css; charset=utf-8", b".badge"),
        ("/console/flowgraph.js", "text/javascript; charset=utf-8", b"export function drawFlow"),
    ],
)
def test_console_assets_are_served_with_a_strict_csp(
    client: httpx.Client, path: str, content_type: str, marker: bytes
) -> None:
    answer = client.get(path)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == content_type
    assert marker in answer.content
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert answer.headers["x-content-type-options"] == "nosniff"
    again = client.get(path, headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""


def test_console_never_writes_markup_from_data() -> None:
    """The modules build the DOM with textContent only: no innerHTML, outerHTML, insertAdjacentHTML or eval."""
    from importlib import resources

    for name in ("console.js", "flowgraph.js"):
        source = resources.files("asya_gateway").joinpath("console").joinpath(name).read_text(encoding="utf-8")
        code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))
        assert "textContent" in code
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in code, (name, sink)


def test_gw_gen_3_console_redirect_unknown_asset_and_method(client: httpx.Client) -> None:
    redirect = client.get("/console")
    assert redirect.status_code == 307
    assert redirect.headers["location"] == "console/"  # relative: an API Gateway stage prefix is kept
    for path in ("/console/app.py", "/console/sub/index.html", "/console/.env"):
        missing = client.get(path)
        assert (missing.status_code, missing.json()) == (404, {"error": "not found"}), path
    refused = client.post("/console/index.html")
    assert (refused.status_code, refused.json()) == (405, {"error": "method not allowed"})
    assert refused.headers["allow"] == "GET, HEAD"


def test_system_mesh_describes_flows_and_actors(client: httpx.Client, mesh: Any) -> None:
    answer = client.get("/api/v1/system/mesh")
    assert answer.status_code == 200
    body = answer.json()
    assert body == mesh_summary_of(mesh.manifest)
    assert body["namespace"] == mesh.manifest.namespace
    assert body["auth"] == "iam"
    pipeline = next(flow for flow in body["flows"] if flow["name"] == "text-pipeline")
    assert pipeline["route"] == ["normalize", "analyze", "summarize"]
    assert pipeline["input_schema"]["required"] == ["text"]
    assert pipeline["timeout"] == 120
    assert body["actors"] == sorted(mesh.manifest.actors)
    assert {"x-sink", "x-sump"} <= set(body["queues"])


def test_gw_mesh_1_system_mesh_carries_each_compiled_flows_graph(client: httpx.Client, mesh: Any) -> None:
    """GW-MESH-1 (R3): a flow written as Python comes with its drawing (the render model's nodes and edges, one
    source with DOT and Mermaid); a static route with ``graph: null``."""
    from asya.flows.render import graph

    flows = {flow["name"]: flow for flow in client.get("/api/v1/system/mesh").json()["flows"]}
    assert flows["text-pipeline"]["graph"] is None
    drawn = flows["triage"]["graph"]
    program = mesh.manifest.flows["triage"].program
    nodes, edges = graph(program)
    assert [node["id"] for node in drawn["nodes"]] == list(nodes)
    assert [(n["kind"], n["label"]) for n in drawn["nodes"]] == list(nodes.values())
    assert [(e["from"], e["to"], e["label"], e["dashed"]) for e in drawn["edges"]] == edges
    by_id = {node["id"]: node for node in drawn["nodes"]}
    assert by_id["start"]["kind"] == "start" and by_id["done"]["kind"] == "end"
    calls = [node for node in drawn["nodes"] if node["kind"] == "call"]
    assert [node["actors"] for node in calls][:2] == [["normalize"], ["analyze"]]
    mapped = next(node for node in drawn["nodes"] if node["kind"] == "map")
    assert mapped["actors"] == ["summarize-chunk", "x-fanin-flow-triage"]  # the slices' actor, then the merge hop
    assert any(edge["dashed"] and edge["label"] == "except KeyError" for edge in drawn["edges"])


def test_gw_auth_4_console_assets_are_public_the_api_is_not(gateway: Callable[..., httpx.Client], mesh: Any) -> None:
    data = mesh.manifest.model_dump(mode="python")
    data["gateway"]["auth"] = {"mode": "api_key", "api_key_secret": "asya/keys"}
    keyed = mesh.manifest.model_validate(data)
    with gateway(keyed, api_keys=(KEY,)) as http:
        assert http.get("/console/").status_code == 200
        assert http.get("/console").status_code == 307
        denied = http.get("/api/v1/system/mesh")
        assert (denied.status_code, denied.json()) == (401, {"error": "authentication required"})
        allowed = http.get("/api/v1/system/mesh", headers={"X-API-Key": KEY})
        assert allowed.json()["auth"] == "api_key"
        assert http.get("/consoleX").status_code == 401  # only /console and below are public
