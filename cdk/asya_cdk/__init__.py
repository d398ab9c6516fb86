"""asya_cdk: the CDK constructs and stack that deploy an asya mesh from ``asya.yaml``.

Imports only the contract modules of the runtime (``asya.naming``, ``asya.manifest``, ``asya.tableschema``,
``asya.config.ENV``, ``asya.environment``). Importing this package creates nothing; building the stack builds the
dependency layers (``pip install --platform ...``, cached under ``.cdk.staging/``) and stages the gateway asset.
"""

from __future__ import annotations

from asya_cdk.actor import Actor
from asya_cdk.alarms import MeshAlarms
from asya_cdk.assets import SourceLayout, render_manifest_json, stage_gateway_asset
from asya_cdk.backstop import Backstop
from asya_cdk.composition import BuiltApp, build_app, load_cdk_context
from asya_cdk.crew import CREW_HANDLERS, SIDECAR_HANDLER, crew_handler
from asya_cdk.dependencies import ACTOR_REQUIREMENTS, GATEWAY_REQUIREMENTS, DependencyBuilder, pinned_requirements
from asya_cdk.errors import DependencyBuildError, DeploymentError
from asya_cdk.gateway import Gateway, lwa_layer_arn, validate_auth
from asya_cdk.settings import CONTEXT, DeploySettings
from asya_cdk.stack import AsyaStack, queue_output_key
from asya_cdk.storage import Storage

__all__ = [
    "ACTOR_REQUIREMENTS",
    "CONTEXT",
    "CREW_HANDLERS",
    "GATEWAY_REQUIREMENTS",
    "SIDECAR_HANDLER",
    "Actor",
    "AsyaStack",
    "Backstop",
    "BuiltApp",
    "DependencyBuildError",
    "DependencyBuilder",
    "DeploySettings",
    "DeploymentError",
    "Gateway",
    "MeshAlarms",
    "SourceLayout",
    "Storage",
    "build_app",
    "crew_handler",
    "load_cdk_context",
    "lwa_layer_arn",
    "pinned_requirements",
    "queue_output_key",
    "render_manifest_json",
    "stage_gateway_asset",
    "validate_auth",
]
