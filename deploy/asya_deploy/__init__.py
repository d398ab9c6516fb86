"""Deploy-time contracts: what the CDK app and the local mode need and no Lambda function runs.

- :mod:`asya_deploy.access`: the grant matrix, who may touch which table key, object prefix and queue (rendered into
  IAM policies by ``asya_cdk.permissions``, enforced on the artifact mesh by its IAM proxy);
- :mod:`asya_deploy.environment`: the environment each function gets (actors, crew, gateway), from the manifest;
- :mod:`asya_deploy.frames`: the compile warnings for actors that may return more than one payload in a flow.

This package is not in the Lambda layer: it may import the runtime's contract modules (``asya.naming``,
``asya.tableschema``, ``asya.manifest``), never the other way round. Importing it creates nothing.
"""

from __future__ import annotations

__all__ = ["access", "environment", "frames"]
