"""The Lambda layers of one mesh: the sidecar library, the actors' and the gateway's locked dependencies, and the
compiled flows when they are too large for the 4 KB environment (:mod:`asya.flowfile`).

Each layer is created in the mesh's own scope under a fixed id (``SidecarLayer``, ``ActorDependencies``,
``GatewayDependencies``, ``FlowsLayer``), arm64 only, for the mesh's runtime. The sidecar layer is compiled to
bytecode when this interpreter matches the runtime's Python (:mod:`asya_cdk.bytecode`); the dependency layers are
bundled locally at synth from the committed locks (:mod:`asya_cdk.dependencies`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asya_cdk.assets import ASSET_EXCLUDES, SourceLayout, stage_flows_layer
from asya_cdk.bytecode import interpreter_matches, stage_compiled
from asya_cdk.dependencies import DependencyBuilder, locked_layer_code
from asya_cdk.locks import Lock

__all__ = ["MeshLayers", "mesh_layers"]


@dataclass(frozen=True)
class MeshLayers:
    sidecar: lambda_.LayerVersion
    actor_dependencies: lambda_.LayerVersion
    gateway_dependencies: lambda_.LayerVersion
    #: ``None`` when the compiled flows fit the actors' environment
    flows: lambda_.LayerVersion | None

    @property
    def actor_layers(self) -> tuple[lambda_.ILayerVersion, ...]:
        """Every actor's layers, in order: sidecar, dependencies, then the flows when they travel in a layer."""
        base: tuple[lambda_.ILayerVersion, ...] = (self.sidecar, self.actor_dependencies)
        return base if self.flows is None else (*base, self.flows)


def mesh_layers(
    scope: Construct,
    *,
    layout: SourceLayout,
    runtime: lambda_.Runtime,
    dependencies: DependencyBuilder | None,
    locks: Mapping[str, Lock],
    flows_json: str | None,
) -> MeshLayers:
    """The mesh's layers (module docstring); ``dependencies`` overrides the builder of the dependency layers."""
    python_version = runtime.name.removeprefix("python")
    compiled = interpreter_matches(python_version)
    builder = dependencies or DependencyBuilder(
        cache_dir=layout.staging_dir, python_version=python_version, compile_bytecode=compiled
    )
    sidecar_dir = (
        stage_compiled(layout.sidecar_layer_dir, layout.staging_dir, "sidecar")
        if compiled
        else layout.sidecar_layer_dir
    )
    sidecar = _layer(
        scope,
        "SidecarLayer",
        lambda_.Code.from_asset(str(sidecar_dir), exclude=[] if compiled else list(ASSET_EXCLUDES)),
        runtime,
        "asya sidecar library (package asya)" + (f", compiled for Python {python_version}" if compiled else ""),
    )
    actor_deps = _layer(
        scope, "ActorDependencies", locked_layer_code(builder, locks["actor"]), runtime, "asya actor dependencies"
    )
    gateway_deps = _layer(
        scope, "GatewayDependencies", locked_layer_code(builder, locks["gateway"]), runtime, "asya gateway dependencies"
    )
    flows = None
    if flows_json is not None:
        staged = stage_flows_layer(flows_json=flows_json, staging_dir=layout.staging_dir)
        flows = _layer(scope, "FlowsLayer", lambda_.Code.from_asset(str(staged)), runtime, "asya compiled flows")
    return MeshLayers(sidecar=sidecar, actor_dependencies=actor_deps, gateway_dependencies=gateway_deps, flows=flows)


def _layer(
    scope: Construct, id: str, code: lambda_.Code, runtime: lambda_.Runtime, description: str
) -> lambda_.LayerVersion:
    return lambda_.LayerVersion(
        scope,
        id,
        code=code,
        compatible_runtimes=[runtime],
        compatible_architectures=[lambda_.Architecture.ARM_64],
        description=description[:256],
    )
