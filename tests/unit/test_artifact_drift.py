"""``asya_local.artifact.drift``: recorded ARNs back to ``asya_deploy.access`` resources, and functions to their roles
(issue 24 item 3, the grant drift check of the artifact suite)."""

from __future__ import annotations

import pytest

from asya_deploy import access
from asya_local.artifact.drift import resource_of, role_of_function

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/asya-demo-tasks"
OWN = "arn:aws:sqs:us-east-1:123456789012:asya-demo-normalize"


@pytest.mark.parametrize(
    ("arn", "expected"),
    [
        ("*", access.Unscoped()),
        (TABLE, access.Table()),
        (f"{TABLE}/index/long_deadlines", access.Index(("long_deadlines",))),
        ("arn:aws:s3:::asya-demo-storage/paused/t1.json", access.Objects("paused/t1.json")),
        ("arn:aws:s3:::asya-demo-storage", access.Listing(())),
        (OWN, access.OwnQueue()),
        ("arn:aws:sqs:us-east-1:123456789012:asya-demo-x-sink", access.Queues("x-sink")),
    ],
)
def test_a_recorded_arn_names_its_access_resource(arn: str, expected: access.Resource) -> None:
    assert resource_of(arn, namespace="demo", own_queue=OWN) == expected


def test_an_arn_of_another_service_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="arn:aws:kms:us-east-1:1:key/k"):
        resource_of("arn:aws:kms:us-east-1:1:key/k", namespace="demo", own_queue=None)


def test_a_recorded_listing_covers_the_roles_declared_listings() -> None:
    """The proxy records a ListBucket's bucket ARN, not its ``s3:prefix``: any declared listing of the role is used."""
    listings = [c for c in access.GATEWAY.calls if isinstance(c.resource, access.Listing)]
    assert listings
    assert set(access.GATEWAY.matching("s3:ListBucket", access.Listing(()))) >= set(listings)


def test_functions_map_to_their_roles() -> None:
    assert role_of_function({"ASYA_ACTOR": "x-sink"}, "asya_crew.sink.lambda_handler") is access.SINK
    assert role_of_function({"ASYA_ACTOR": "normalize"}, "asya.sidecar.lambda_handler") is access.ACTOR
    assert role_of_function({"ASYA_ACTOR": "x-fanin-chunk"}, "x") is access.AGGREGATOR
    assert role_of_function({}, "asya_gateway.backstop.lambda_handler") is access.BACKSTOP
    assert role_of_function({"AWS_LWA_INVOKE_MODE": "response_stream"}, "run.sh") is access.GATEWAY
