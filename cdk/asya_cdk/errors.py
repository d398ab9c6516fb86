"""Exception classes of the CDK app. Every class name ends in ``Error``."""

from __future__ import annotations

from asya.exceptions import AsyaError

__all__ = ["DependencyBuildError", "DeploymentError"]


class DeploymentError(AsyaError, ValueError):
    """The manifest, a construct prop or a context value cannot be deployed; the message names the field, the bad
    value and the fix. Raised before any resource is created."""


class DependencyBuildError(AsyaError):
    """``pip install`` of a dependencies layer failed; the message carries the command and pip's output."""
