"""``AsyaMesh(edge=EdgeProps(...))`` merged over the manifest's ``gateway.edge`` (docs/deploy.md, "Edge settings as
construct props"; GW-EDGE-6 (R3)): the prop alone, the prop winning field by field, and errors naming the prop's
field. The synthesized stage is asserted in tests/infra/test_mesh_construct.py."""

from __future__ import annotations

import pytest

from asya.manifest import GatewayEdge
from asya_cdk.edgeprops import EdgeProps, MethodThrottle, merge_edge

pytestmark = pytest.mark.unit

WAF = "arn:aws:wafv2:eu-west-1:111122223333:regional/webacl/shop/0123abcd-4567-89ab-cdef-0123456789ab"
CERT = "arn:aws:acm:eu-west-1:111122223333:certificate/0123abcd-4567-89ab-cdef-0123456789ab"


def test_the_prop_alone_sets_what_it_names_and_keeps_the_defaults() -> None:
    merged, problems = merge_edge(
        GatewayEdge(), EdgeProps(rate_limit=5, domain_name="api.shop.example", certificate_arn=CERT)
    )
    assert problems == []
    assert (merged.throttle.rate_limit, merged.throttle.burst_limit) == (5, 200)
    assert merged.domain is not None and (merged.domain.name, merged.domain.base_path) == ("api.shop.example", "")
    assert merged.waf_web_acl_arn is None


def test_the_prop_wins_field_by_field_and_method_throttles_merge_per_key() -> None:
    manifest = GatewayEdge.model_validate(
        {
            "throttle": {"rate_limit": 10, "burst_limit": 20, "methods": {"/api/v1/mesh/POST": {"rate_limit": 1}}},
            "waf_web_acl_arn": WAF,
            "domain": {"name": "api.shop.example", "certificate_arn": CERT, "base_path": "v1"},
        }
    )
    props = EdgeProps(
        burst_limit=40,
        method_throttles={"/api/v1/mesh/GET": MethodThrottle(rate_limit=2, burst_limit=4)},
        domain_base_path="v2",
    )
    merged, problems = merge_edge(manifest, props)
    assert problems == []
    assert (merged.throttle.rate_limit, merged.throttle.burst_limit) == (10, 40)
    assert set(merged.throttle.methods) == {"/api/v1/mesh/POST", "/api/v1/mesh/GET"}
    assert merged.waf_web_acl_arn == WAF
    assert merged.domain is not None and (merged.domain.name, merged.domain.base_path) == ("api.shop.example", "v2")
    assert merge_edge(manifest, None) == (manifest, [])


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (EdgeProps(rate_limit=-1), "edge.rate_limit: -1: "),
        (EdgeProps(domain_name="API"), "edge.domain_name: 'API': "),
        (
            EdgeProps(method_throttles={"/x/GET": MethodThrottle(rate_limit=1, burst_limit=-2)}),
            "edge.method_throttles['/x/GET'].burst_limit: -2",
        ),
        ({"rate_limit": 1}, "edge: dict given; pass asya_cdk.EdgeProps(...)"),
    ],
)
def test_a_bad_prop_names_its_field_and_value(props: object, expected: str) -> None:
    merged, problems = merge_edge(GatewayEdge(), props)
    assert any(problem.startswith(expected) for problem in problems), problems
    assert merged == GatewayEdge()
