"""``AsyaMesh(edge=EdgeProps(...))``: the manifest's ``gateway.edge`` settings as a typed construct prop.

Precedence (docs/deploy.md, "Edge settings as construct props"): the prop wins field by field. A field left ``None``
keeps the manifest's value (or its default); ``method_throttles`` merge per method key, the prop's limits replacing
the manifest's for the same key; ``domain_name`` / ``certificate_arn`` / ``domain_base_path`` replace the fields of
the manifest's ``gateway.edge.domain`` (a prop domain without a manifest domain needs both the name and the
certificate). The merged settings are validated by the manifest model (:class:`asya.manifest.GatewayEdge`) and by
:func:`~asya_cdk.edgeauth.check_edge`; every problem is reported as ``edge.FIELD: VALUE ...`` with the fix, among the
construct's other problems, before anything is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from asya.manifest import GatewayEdge

__all__ = ["EdgeProps", "MethodThrottle", "merge_edge"]


@dataclass(frozen=True, kw_only=True)
class MethodThrottle:
    """One method's limits below the stage's: a steady rate (requests per second) and a burst."""

    rate_limit: float
    burst_limit: int


@dataclass(frozen=True, kw_only=True)
class EdgeProps:
    """What API Gateway does before a request reaches the gateway (the manifest's ``gateway.edge``)."""

    #: The stage's steady rate, requests per second (manifest ``throttle.rate_limit``).
    rate_limit: float | None = None
    #: The stage's burst (manifest ``throttle.burst_limit``).
    burst_limit: int | None = None
    #: Per-method limits keyed ``/resource/path/METHOD`` such as ``/api/v1/mesh/POST`` (manifest ``throttle.methods``).
    method_throttles: Mapping[str, MethodThrottle] | None = None
    #: A regional WAFv2 web ACL ARN to associate with the stage.
    waf_web_acl_arn: str | None = None
    #: A custom domain name (regional endpoint, TLS 1.2) and its ACM certificate in the API's region.
    domain_name: str | None = None
    certificate_arn: str | None = None
    domain_base_path: str | None = None
    #: The Secrets Manager secret (name or ARN) of the reporter keys (GW-EVT-6).
    reporter_key_secret: str | None = None


#: The manifest's location of each prop field's value (dotted, as pydantic's error ``loc``): where the merge writes a
#: prop's value and what an error about it names.
_PROP_OF: Mapping[str, str] = {
    "throttle.rate_limit": "rate_limit",
    "throttle.burst_limit": "burst_limit",
    "waf_web_acl_arn": "waf_web_acl_arn",
    "domain.name": "domain_name",
    "domain.certificate_arn": "certificate_arn",
    "domain.base_path": "domain_base_path",
    "reporter_key_secret": "reporter_key_secret",
}


def merge_edge(manifest: GatewayEdge, props: object) -> tuple[GatewayEdge, list[str]]:
    """The manifest's edge settings with ``props`` (an :class:`EdgeProps` or ``None``) over them, and the problems
    of the result (module docstring). Types are checked too: a caller without a type checker gets an error naming the
    prop, not a traceback."""
    if props is None:
        return manifest, []
    if not isinstance(props, EdgeProps):
        return manifest, [f"edge: {type(props).__name__} given; pass asya_cdk.EdgeProps(...)"]
    data: dict[str, Any] = manifest.model_dump(exclude_unset=False)
    for path, field in _PROP_OF.items():
        value = getattr(props, field)
        if value is not None:
            *parents, leaf = path.split(".")
            section = data
            for name in parents:  # a section the manifest leaves out (``domain``) starts empty
                section[name] = section.get(name) or {}
                section = section[name]
            section[leaf] = value
    throttle = data["throttle"]
    problems: list[str] = []
    limits: Mapping[str, object] = props.method_throttles or {}
    for key, limit in limits.items():
        if not isinstance(limit, MethodThrottle):
            problems.append(
                f"edge.method_throttles[{key!r}]: {limit!r} is not a MethodThrottle; "
                "use MethodThrottle(rate_limit=..., burst_limit=...)"
            )
            continue
        throttle["methods"][key] = {"rate_limit": limit.rate_limit, "burst_limit": limit.burst_limit}
    if problems:
        return manifest, problems
    try:
        return GatewayEdge.model_validate(data), []
    except ValidationError as exc:
        return manifest, [_message(error) for error in exc.errors()]


def _message(error: Mapping[str, Any]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    dotted = ".".join(loc)
    reason = str(error["msg"]).removeprefix("Value error, ")
    if loc[:2] == ("throttle", "methods"):
        if len(loc) == 2:  # the keys' validator: its message names the bad key
            return f"edge.method_throttles: {reason}"
        field = f"method_throttles[{loc[2]!r}]" + "".join(f".{part}" for part in loc[3:])
    else:
        field = _PROP_OF.get(dotted, dotted)
    if error["type"] == "missing" and loc[0] == "domain":
        return f"edge.{field}: missing; a custom domain needs both domain_name and certificate_arn"
    return f"edge.{field}: {error.get('input')!r}: {reason}"
