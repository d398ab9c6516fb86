"""The A2A agent card (GW-A2A-1, GW-A2A-2), public (GW-AUTH-2).

Served at ``/.well-known/agent-card.json`` (the path the ``a2a-sdk`` 1.x client reads) and at the spec's
``/.well-known/agent.json`` (A2A 0.2/0.3 clients). One card serves both: the 0.3 members (``protocolVersion``
``0.3.0``, ``url``, ``preferredTransport`` ``JSONRPC``) and 1.0's ``supportedInterfaces``, which lists the same URL
for JSON-RPC 1.0 (preferred by 1.x clients) and 0.3 (``asya_gateway.a2a.endpoint`` serves both method sets).
Values come from the manifest's ``gateway.a2a`` block (``name``, ``description``, ``version``, ``public_url``,
``provider_organization``, ``provider_url``); ``url`` is ``public_url`` (else :func:`base_url`) plus ``/a2a/``.
Skills are the flows with ``a2a`` enabled.
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.manifest import A2ASkillOptions, Manifest
from asya_gateway.context import context_of
from asya_gateway.requestid import REQUEST_CONTEXT_HEADER

__all__ = ["CARD_PATHS", "a2a_skills", "agent_card", "base_url", "build_card"]

CARD_PATHS: Final = ("/.well-known/agent-card.json", "/.well-known/agent.json")


def a2a_skills(manifest: Manifest) -> dict[str, A2ASkillOptions]:
    """``{flow name: its a2a options}`` of the A2A-enabled flows (``a2a: true`` gives the defaults), sorted by name."""
    return {name: option for name in sorted(manifest.flows) if (option := manifest.flows[name].a2a) is not None}


def _skill(manifest: Manifest, name: str, options: A2ASkillOptions) -> dict[str, Any]:
    skill: dict[str, Any] = {
        "id": name,
        "name": name,
        "description": manifest.flows[name].description,
        "tags": list(options.tags or [name]),
    }
    if options.examples:
        skill["examples"] = list(options.examples)
    if options.input_modes:
        skill["inputModes"] = list(options.input_modes)
    if options.output_modes:
        skill["outputModes"] = list(options.output_modes)
    return skill


def build_card(manifest: Manifest, base_url: str) -> dict[str, Any]:
    """GW-A2A-1 for this manifest; ``base_url`` is used when ``gateway.a2a.public_url`` is not set."""
    conf = manifest.gateway.a2a
    root = (conf.public_url or base_url).rstrip("/")
    card: dict[str, Any] = {
        "protocolVersion": "0.3.0",
        "name": conf.name,
        "description": conf.description,
        "url": f"{root}/a2a/",
        "preferredTransport": "JSONRPC",
        "supportedInterfaces": [
            {"url": f"{root}/a2a/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": f"{root}/a2a/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "version": conf.version,
        "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False},
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": [_skill(manifest, name, options) for name, options in a2a_skills(manifest).items()],
    }
    if conf.provider_organization:
        card["provider"] = {"organization": conf.provider_organization, "url": conf.provider_url or ""}
    mode = manifest.gateway.auth.mode
    if mode == "api_key":
        card["securitySchemes"] = {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
        card["security"] = [{"apiKey": []}]
    elif mode == "jwt":
        card["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}
        card["security"] = [{"bearer": []}]
    return card


def base_url(request: Request) -> str:
    """The gateway's external base URL as this request reached it: behind API Gateway, ``https://{domainName}/
    {stage}`` from the request context the Lambda Web Adapter passes (the app's own URL has no stage); locally the
    request's scheme and host. A custom domain with a base path needs ``gateway.a2a.public_url``."""
    raw = request.headers.get(REQUEST_CONTEXT_HEADER)
    if raw:
        try:
            context: Any = json.loads(raw)
        except ValueError:
            context = None
        if isinstance(context, dict) and isinstance(context.get("domainName"), str) and context["domainName"]:
            stage = context.get("stage")
            suffix = f"/{stage}" if isinstance(stage, str) and stage and stage != "$default" else ""
            return f"https://{context['domainName']}{suffix}"
    root = request.scope.get("root_path", "")
    return f"{request.url.scheme}://{request.url.netloc}{root}"


async def agent_card(request: Request) -> Response:
    return JSONResponse(build_card(context_of(request).manifest, base_url(request)))
