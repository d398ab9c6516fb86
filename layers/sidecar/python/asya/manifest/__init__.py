"""The ``asya.yaml`` manifest model: the single source of truth for the CDK app, the local mode and the gateway.

``load_manifest(path)`` reads YAML, ``parse_manifest(data, base_dir=...)`` validates a mapping. Validation happens
once, before anything is created (P-MAN-1); every error is a :class:`ManifestError` whose message names the field
path (``actors.analyze.timeout``) and the bad value. ``defaults`` applies to every user actor, the actor's own fields
win, ``env`` maps are merged (P-MAN-2). Deployment sizing (Lambda timeout, visibility timeout, P-MAN-4) is computed
here so CDK and the local mode agree.

Modules: :mod:`~asya.manifest.blocks` (the blocks and the sizing rules), :mod:`~asya.manifest.model` (the whole
manifest and its cross-references), :mod:`~asya.manifest.loader` (YAML and error messages).

This package imports pydantic and is not used on the actor Lambda's hot path; actor Lambdas get their configuration
through environment variables (``asya.config``).
"""

from __future__ import annotations

from asya.manifest.blocks import (
    CREW_SETTINGS,
    HISTORY_BODY_DEFAULT,
    HISTORY_BODY_MAX,
    HISTORY_BODY_MIN,
    A2ASkillOptions,
    ActorSettings,
    ActorSpec,
    CrewConfig,
    DeployedActor,
    DeploymentConfig,
    FanIn,
    Flow,
    GatewayA2A,
    GatewayAuth,
    GatewayConfig,
    GatewayEdge,
    ObservabilityConfig,
    Policy,
    Resiliency,
    Rule,
    StorageConfig,
    lambda_timeout,
    visibility_timeout,
)
from asya.manifest.capacity import CapacityTarget
from asya.manifest.dataplane import BackupConfig, CheckpointLifecycle, VpcConfig
from asya.manifest.loader import load_manifest, parse_manifest
from asya.manifest.model import Manifest

__all__ = [
    "CREW_SETTINGS",
    "HISTORY_BODY_DEFAULT",
    "HISTORY_BODY_MAX",
    "HISTORY_BODY_MIN",
    "A2ASkillOptions",
    "ActorSettings",
    "ActorSpec",
    "BackupConfig",
    "CapacityTarget",
    "CheckpointLifecycle",
    "CrewConfig",
    "DeployedActor",
    "DeploymentConfig",
    "FanIn",
    "Flow",
    "GatewayA2A",
    "GatewayAuth",
    "GatewayConfig",
    "GatewayEdge",
    "Manifest",
    "ObservabilityConfig",
    "Policy",
    "Resiliency",
    "Rule",
    "StorageConfig",
    "VpcConfig",
    "lambda_timeout",
    "load_manifest",
    "parse_manifest",
    "visibility_timeout",
]
