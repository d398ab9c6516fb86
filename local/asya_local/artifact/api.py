"""The assembly's REST API on loopback: :func:`start_api` starts the API front and the test principal's signer.

The front (:class:`~asya_local.artifact.apifront.ApiFront`) serves the template's methods under the stage ``prod``
and relays them to the web functions' servers; its ``AWS_IAM`` methods know one principal, :data:`TEST_PRINCIPAL`,
whose identity policy allows ``execute-api:Invoke`` on the whole API (evaluated by :mod:`asya_local.iam` when it is
available); its ``CUSTOM`` methods run their Lambda authorizer
(:class:`~asya_local.artifact.authorizers.EdgeAuthorizers`) through ``invoke_authorizer``. The signer
(:class:`~asya_local.artifact.apifront.SigningClient`) signs each plain request as the test principal, so a suite
written against a gateway URL runs unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from asya_local.artifact.apifront import ApiFront, Principal, SigningClient
from asya_local.artifact.authorizers import EdgeAuthorizers
from asya_local.artifact.functions import FunctionPool
from asya_local.artifact.model import MeshSpec
from asya_local.artifact.process import Credentials
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from asya_local.moto_server import MOTO_ACCOUNT_ID
from asya_local.serving import UvicornThread

__all__ = ["TEST_PRINCIPAL", "ApiEndpoints", "authorizer_invoker", "start_api"]

#: The test principal that signs API requests.
TEST_PRINCIPAL: Final = "asya-artifact-tester"
_STAGE: Final = "prod"


@dataclass(frozen=True, slots=True)
class ApiEndpoints:
    """The started API: ``servers`` to stop (in reverse), ``api_url`` the front and ``url`` the signer (stage
    included)."""

    front: ApiFront
    authorizers: EdgeAuthorizers
    servers: tuple[UvicornThread, ...]
    api_url: str
    url: str


def start_api(
    spec: MeshSpec,
    *,
    upstreams: Mapping[str, str],
    tester: Credentials,
    region: str,
    port: int,
    invoke_authorizer: Callable[[str, dict[str, Any]], Any],
) -> ApiEndpoints:
    """The front over ``spec.methods`` (``upstreams``: web server URL by function ARN) and the signer on ``port``."""
    missing = {m.function for m in spec.methods} - set(upstreams)
    if missing:
        raise LocalModeError(f"API methods integrate functions that are not web functions: {sorted(map(str, missing))}")
    api_arn = f"arn:aws:execute-api:{region}:{MOTO_ACCOUNT_ID}:local"
    principals = {
        tester.access_key_id: Principal(TEST_PRINCIPAL, tester.secret_access_key, _invoke_policy(f"{api_arn}/*"))
    }
    authorizers = EdgeAuthorizers(invoke_authorizer, api_arn=api_arn, stage=_STAGE)
    front = ApiFront(
        spec.methods,
        upstreams=upstreams,
        principals=principals,
        stage=_STAGE,
        api_arn=api_arn,
        authorizers=authorizers,
        limits=spec.edge_limits,
    )
    front_server = UvicornThread(front, port=0, name="asya-artifact-api")
    front_server.start()
    signer = UvicornThread(
        SigningClient(
            front_server.url, access_key_id=tester.access_key_id, secret=tester.secret_access_key, region=region
        ),
        port=port,
        name="asya-artifact-signer",
    )
    signer.start()
    return ApiEndpoints(
        front=front,
        authorizers=authorizers,
        servers=(front_server, signer),
        api_url=f"{front_server.url}/{_STAGE}",
        url=f"{signer.url}/{_STAGE}",
    )


def authorizer_invoker(
    spec: Callable[[], MeshSpec], pools: Mapping[str, FunctionPool]
) -> Callable[[str, dict[str, Any]], Any]:
    """An API authorizer's invocation (:mod:`~asya_local.artifact.authorizers`): its function's pool, looked up in
    the spec the mesh runs at the time of the call (an update may replace it)."""

    def invoke(arn: str, event: dict[str, Any]) -> Any:
        function = spec().functions.get(arn)
        if function is None or arn not in pools:
            raise LocalModeError(f"authorizer function {arn} is not an invokable function of the assembly")
        context = LambdaContext(
            function_name=function.name,
            invoked_function_arn=arn,
            memory_limit_in_mb=function.memory,
            timeout_seconds=float(function.timeout),
            log_stream_name="local/[$LATEST]authorizer",
            monotonic=time.monotonic,
        )
        return pools[arn].invoke(event, context)

    return invoke


def _invoke_policy(resource: str) -> Callable[[str], bool]:
    """The test principal's identity policy: ``execute-api:Invoke`` on the API, evaluated as IAM does when the
    evaluator is available (else a wildcard match of that one statement)."""
    try:
        from asya_local.iam import PolicySet
    except ImportError:
        import fnmatch

        return lambda arn: fnmatch.fnmatchcase(arn, resource)
    policy = PolicySet.from_documents(
        [
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resource}],
            }
        ]
    )
    return lambda arn: policy.evaluate("execute-api:Invoke", arn, {}).allowed
