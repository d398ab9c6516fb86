"""The AWS Lambda Web Adapter layer (arm64) the gateway runs under: a pinned map of where AWS publishes it.

AWS publishes ``LambdaAdapterLayerArm64`` from account ``753240598075`` in the commercial regions below
(awslabs/aws-lambda-web-adapter, "Zip Packages"). The China regions publish the x86_64 layer only and GovCloud none,
so a region missing from :data:`LWA_REGIONS` is refused at synth with :class:`~asya_cdk.errors.DeploymentError`
instead of producing a template whose gateway fails at deploy. A caller with its own copy of the layer passes it to
``AsyaMesh(web_adapter_layer=...)`` and this map is not consulted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import Token

from asya_cdk.errors import DeploymentError

__all__ = ["DEFAULT_LWA_VERSION", "LWA_REGIONS", "lwa_layer_arn"]

#: The layer version the gateway was tested with.
DEFAULT_LWA_VERSION: Final = 25
_LAYER: Final = "LambdaAdapterLayerArm64"

#: Region -> (partition, publishing account) of the arm64 layer.
LWA_REGIONS: Final[Mapping[str, tuple[str, str]]] = {
    region: ("aws", "753240598075")
    for region in (
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "af-south-1",
        "ap-east-1",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ca-central-1",
        "ca-west-1",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "il-central-1",
        "me-central-1",
        "me-south-1",
        "sa-east-1",
    )
}


def lwa_layer_arn(region: str, version: int = DEFAULT_LWA_VERSION) -> str:
    """ARN of the arm64 Lambda Web Adapter layer in ``region``; :class:`DeploymentError` where none is published."""
    if Token.is_unresolved(region):
        raise DeploymentError(
            "web_adapter_layer: the stack's region is not known at synth (an environment-agnostic stack), so the "
            "Lambda Web Adapter layer cannot be chosen; give the stack env=Environment(region=...) or pass "
            "web_adapter_layer=LayerVersion.from_layer_version_arn(...)"
        )
    if version < 1:
        raise DeploymentError(f"lwa layer version: must be >= 1, got {version!r}")
    try:
        partition, account = LWA_REGIONS[region]
    except KeyError:
        raise DeploymentError(
            f"region {region!r}: AWS publishes no arm64 Lambda Web Adapter layer there (known: "
            f"{', '.join(sorted(LWA_REGIONS))}); publish the layer yourself and pass "
            "web_adapter_layer=LayerVersion.from_layer_version_arn(...)"
        ) from None
    return f"arn:{partition}:lambda:{region}:{account}:layer:{_LAYER}:{version}"
