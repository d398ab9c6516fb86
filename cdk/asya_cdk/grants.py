"""The gateway grants of :class:`~asya_cdk.mesh.AsyaMesh` (``grant_create_tasks``, ``grant_read_tasks``):
``execute-api:Invoke`` on the task routes of docs/http.md, in CDK's style (an ``iam.Grant`` back).

API Gateway checks IAM permissions only under ``gateway.auth.mode: iam`` (GW-AUTH-3); under any other mode such a
grant would authorize nothing, so it is refused with the way out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam

from asya_cdk.errors import DeploymentError

__all__ = ["TASK_ROUTES", "grant_task_routes"]

#: Method and path (under the stage) of each grant's routes; ``*`` matches any path segments.
TASK_ROUTES: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "create": (("POST", "/api/v1/mesh"), ("POST", "/api/v1/mesh/")),
    "read": (("GET", "/api/v1/mesh"), ("GET", "/api/v1/mesh/*")),
}


def grant_task_routes(
    api: apigw.RestApi, grantee: iam.IGrantable, *, kind: str, auth_mode: str, method: str
) -> iam.Grant:
    """Grant ``execute-api:Invoke`` on the ``kind`` routes of ``api``'s deployed stage; ``method`` names the caller
    in the error."""
    if auth_mode != "iam":
        raise DeploymentError(
            f"{method}: gateway.auth.mode is {auth_mode!r}, where API Gateway does not check IAM permissions; "
            "grants apply under mode 'iam' only (give the caller an API key or a token instead)"
        )
    stage = api.deployment_stage.stage_name
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["execute-api:Invoke"],
        resource_arns=[api.arn_for_execute_api(verb, path, stage) for verb, path in TASK_ROUTES[kind]],
    )
