"""Deployment settings read once from the CDK context (``cdk.json`` or ``-c key=value``) into a frozen object.

| context key | meaning | default |
|---|---|---|
| ``manifest`` | path of the manifest, relative to the working directory | ``./asya.yaml`` |
| ``asya:region`` | region of the env-agnostic stack | ``$CDK_DEFAULT_REGION``, else ``us-east-1`` |
| ``asya:pythonVersion`` | Lambda Python runtime (the manifest's ``deployment.python_version`` wins) | ``3.14`` |
| ``asya:lwaLayerVersion`` | version of the AWS Lambda Web Adapter layer ``LambdaAdapterLayerArm64`` | ``25`` |
| ``asya:stackName`` | CloudFormation stack name | ``asya-{namespace}`` |
| ``asya:deleteData`` | ``true``: deploy with ``retain_data: false`` (``asya destroy --delete-data``) | ``false`` |

Values given with ``-c`` arrive as strings; numbers are converted here, with an error naming the key and the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from aws_cdk import aws_lambda as lambda_

from asya_cdk.errors import DeploymentError

__all__ = ["CONTEXT", "PYTHON_RUNTIMES", "DeploySettings"]


@dataclass(frozen=True, slots=True)
class _ContextKeys:
    manifest: str = "manifest"
    region: str = "asya:region"
    python_version: str = "asya:pythonVersion"
    lwa_layer_version: str = "asya:lwaLayerVersion"
    stack_name: str = "asya:stackName"
    delete_data: str = "asya:deleteData"


#: The context keys the app reads, in one place.
CONTEXT: Final = _ContextKeys()

#: Lambda runtimes the dependency layers can be built for (pydantic-core, rpds-py and PyYAML ship cp3xx manylinux
#: aarch64 wheels for each). 3.14 is the default: cdk-nag AwsSolutions-L1 wants the newest runtime CDK knows.
PYTHON_RUNTIMES: Final[Mapping[str, lambda_.Runtime]] = {
    "3.11": lambda_.Runtime.PYTHON_3_11,
    "3.12": lambda_.Runtime.PYTHON_3_12,
    "3.13": lambda_.Runtime.PYTHON_3_13,
    "3.14": lambda_.Runtime.PYTHON_3_14,
}

DEFAULT_REGION: Final = "us-east-1"


@dataclass(frozen=True, slots=True)
class DeploySettings:
    """Settings that are not part of the mesh itself: where and how it is deployed."""

    region: str = DEFAULT_REGION
    python_version: str | None = None
    lwa_layer_version: int = 25
    stack_name: str | None = None
    #: Synthesize the table and bucket to be deleted with the stack, whatever the manifest's retain_data says.
    delete_data: bool = False

    def __post_init__(self) -> None:
        if self.python_version is not None and self.python_version not in PYTHON_RUNTIMES:
            raise DeploymentError(
                f"{CONTEXT.python_version}: unsupported Python version {self.python_version!r}; "
                f"use one of {sorted(PYTHON_RUNTIMES)}"
            )
        if self.lwa_layer_version < 1:
            raise DeploymentError(
                f"{CONTEXT.lwa_layer_version}: layer version must be >= 1, got {self.lwa_layer_version!r}"
            )
        if not self.region:
            raise DeploymentError(f"{CONTEXT.region}: region must not be empty")

    @property
    def runtime(self) -> lambda_.Runtime | None:
        """The context's runtime; ``None``: the manifest's, else the mesh's default."""
        return None if self.python_version is None else PYTHON_RUNTIMES[self.python_version]

    @classmethod
    def from_context(cls, context: Mapping[str, object], env: Mapping[str, str]) -> DeploySettings:
        """Read the settings from CDK context values; ``env`` supplies ``CDK_DEFAULT_REGION``."""
        region = context.get(CONTEXT.region) or env.get("CDK_DEFAULT_REGION") or DEFAULT_REGION
        stack_name = context.get(CONTEXT.stack_name)
        return cls(
            region=str(region),
            python_version=None
            if context.get(CONTEXT.python_version) in (None, "")
            else str(context[CONTEXT.python_version]),
            lwa_layer_version=_integer(context, CONTEXT.lwa_layer_version, 25),
            stack_name=None if stack_name in (None, "") else str(stack_name),
            delete_data=_boolean(context, CONTEXT.delete_data),
        )


def _integer(context: Mapping[str, object], key: str, default: int) -> int:
    raw = context.get(key, default)
    if isinstance(raw, bool):
        raise DeploymentError(f"{key}: expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw))
    except ValueError:
        raise DeploymentError(f"{key}: expected an integer, got {raw!r}") from None


def _boolean(context: Mapping[str, object], key: str) -> bool:
    raw = context.get(key, False)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise DeploymentError(f"{key}: expected true or false, got {raw!r}")
