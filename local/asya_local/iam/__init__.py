"""IAM enforcement for the artifact mesh: identity-policy evaluation, request-to-action mapping, a checking proxy.

:class:`PolicySet` evaluates a principal's identity-based policies (:mod:`asya_local.iam.policy`);
:func:`authorize_request` derives from one raw HTTP request what IAM would check (:mod:`asya_local.iam.requests`);
:class:`PolicyProxy` sits in front of moto's server and holds each principal's calls to its policies
(:mod:`asya_local.iam.proxy`), and plays the throttling a test asks for with :class:`FaultRule`
(:mod:`asya_local.iam.faults`).
"""

from __future__ import annotations

from asya_local.iam.conditions import PolicyError
from asya_local.iam.faults import FaultRule, FaultRules
from asya_local.iam.model import ALWAYS_ALLOWED, MISSING_KEY, UNMODELLED, AccessRecord, RequestContext
from asya_local.iam.policy import Decision, Evaluation, PolicySet
from asya_local.iam.proxy import PolicyProxy, ProxyError
from asya_local.iam.requests import authorize_request

__all__ = [
    "ALWAYS_ALLOWED",
    "MISSING_KEY",
    "UNMODELLED",
    "AccessRecord",
    "Decision",
    "Evaluation",
    "FaultRule",
    "FaultRules",
    "PolicyError",
    "PolicyProxy",
    "PolicySet",
    "ProxyError",
    "RequestContext",
    "authorize_request",
]
