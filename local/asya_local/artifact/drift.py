"""Grant drift: which declared calls of ``asya_deploy.access`` a run of the artifact mesh never used.

:func:`role_of_function` names the :data:`asya_deploy.access.ROLES` entry a synthesized function's policy is derived
from (``ASYA_ACTOR`` through :func:`asya_deploy.access.role_of`; the backstop by its handler; the gateway and its stream
function otherwise). :func:`resource_of` turns a recorded resource ARN back into an :mod:`asya_deploy.access` resource:
a table, an index, an object key, a listing (the proxy records the bucket ARN of a ``ListBucket``, not its
``s3:prefix``, so a recorded listing covers each declared listing of its role), a mesh queue (the function's own queue,
consumed by its event source mapping, is :class:`~asya_deploy.access.OwnQueue`) or ``*``. :func:`unused_calls` maps
every recorded call (the IAM proxy's :meth:`~asya_local.iam.PolicyProxy.used`) to the entries covering it and answers,
per role, the entries nothing used. Secrets Manager reads are left out: the secrets' grants come from their constructs'
own ``grant_read`` (the reporter keys' secret, GW-EDGE-2; an ``api_key`` mode's key secret), not from the declaration,
so there is no declared entry for them to use (a denied read still fails the suite's zero-denials check).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from asya import naming
from asya_deploy import access
from asya_local.artifact.model import MeshSpec

__all__ = ["resource_of", "role_of_function", "unused_calls"]

_BACKSTOP_HANDLER = "asya_gateway.backstop.lambda_handler"
#: ARNs of grants made outside :mod:`asya_deploy.access` (see the module docstring)
_UNDECLARED: Final = ("arn:aws:secretsmanager:",)


def role_of_function(environment: Mapping[str, str], handler: str) -> access.Role:
    actor = environment.get("ASYA_ACTOR")
    if actor:
        return access.role_of(actor)
    return access.BACKSTOP if handler == _BACKSTOP_HANDLER else access.GATEWAY


def resource_of(arn: str, *, namespace: str, own_queue: str | None) -> access.Resource:
    """The :mod:`asya_deploy.access` resource a recorded ARN names; raises ``ValueError`` for one it cannot name."""
    if arn == "*":
        return access.Unscoped()
    if arn.startswith("arn:aws:dynamodb:"):
        _, _, path = arn.partition(":table/")
        _, marker, index = path.partition("/index/")
        return access.Index((index,)) if marker else access.Table()
    if arn.startswith("arn:aws:s3:::"):
        _, slash, key = arn.removeprefix("arn:aws:s3:::").partition("/")
        return access.Objects(key) if slash else access.Listing(())
    if arn.startswith("arn:aws:sqs:"):
        if arn == own_queue:
            return access.OwnQueue()
        return access.Queues(arn.rsplit(":", 1)[1].removeprefix(naming.queue_name(namespace, "")))
    raise ValueError(f"recorded resource {arn!r} names nothing asya_deploy.access declares")


def unused_calls(spec: MeshSpec, used: Iterable[tuple[str, str, str]]) -> dict[str, set[str]]:
    """Per role of the mesh's functions, the names of its declared calls no recorded call matched."""
    namespace = next(
        (f.environment["ASYA_NAMESPACE"] for f in spec.functions.values() if "ASYA_NAMESPACE" in f.environment), ""
    )
    own = {source.function: source.queue_arn for source in spec.event_sources}
    by_name = {f.name: f for f in spec.functions.values()}
    roles: dict[str, access.Role] = {}
    matched: dict[str, set[str]] = {}
    for function in spec.functions.values():
        role = role_of_function(function.environment, function.handler)
        roles[role.name] = role
        matched.setdefault(role.name, set())
    for principal, action, arn in used:
        caller = by_name.get(principal)
        if caller is None or arn.startswith(_UNDECLARED):
            continue
        role = role_of_function(caller.environment, caller.handler)
        resource = resource_of(arn, namespace=namespace, own_queue=own.get(caller.arn))
        matched[role.name].update(call.name for call in role.matching(action, resource))
    return {
        name: {call.name for call in role.calls} - matched[name]
        for name, role in roles.items()
        if {call.name for call in role.calls} - matched[name]
    }
