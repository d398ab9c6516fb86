"""The HTTP reporter (P-STAT-18): actors running outside AWS report through the gateway's producer route and
read pre-flight over HTTP, instead of writing to the task store.

Configuration (``asya.config``): ``ASYA_REPORTER=http`` (implied by ``ASYA_GATEWAY_URL``), ``ASYA_GATEWAY_URL`` (the
default gateway base), ``ASYA_GATEWAY_API_KEY`` (sent as ``X-API-Key`` with the pre-flight reads) and
``ASYA_GATEWAY_REPORTER_KEY`` (sent as ``X-Asya-Reporter-Key`` with the posts, GW-EVT-1), both to the origin of
``ASYA_GATEWAY_URL`` only.
:func:`http_reporter` builds the reporter the sidecar uses in place of :class:`asya.reporting.Reporter`; it needs
``httpx`` (installed with the ``asya-serverless`` package; the deployed actor layer does not ship it, since actors in
AWS write to the store).

Modules: ``breaker`` (circuit breaker), ``client`` (background posts, bounded reads),
``reporter`` (the events); the SSRF guard and origins are ``asya.gatewayurl``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from asya.config import ActorConfig, ConfigError
from asya.gatewayurl import endpoint, gateway_base, is_gateway_url, origin, same_origin
from asya.httpreport.breaker import FAILURE_THRESHOLD, PAUSE_SECONDS, CircuitBreaker
from asya.httpreport.client import (
    POST_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    SETTLE_SECONDS,
    GatewayClient,
    StatusRead,
)
from asya.httpreport.reporter import FLY_LIMIT_BYTES, HttpReporter

if TYPE_CHECKING:
    from asya.store import TaskStore

__all__ = [
    "FAILURE_THRESHOLD",
    "FLY_LIMIT_BYTES",
    "PAUSE_SECONDS",
    "POST_TIMEOUT_SECONDS",
    "READ_TIMEOUT_SECONDS",
    "SETTLE_SECONDS",
    "CircuitBreaker",
    "GatewayClient",
    "HttpReporter",
    "StatusRead",
    "endpoint",
    "gateway_base",
    "http_reporter",
    "is_gateway_url",
    "origin",
    "same_origin",
]


def http_reporter(config: ActorConfig, store: TaskStore, *, logger: logging.Logger | Any) -> HttpReporter | None:
    """The HTTP reporter ``config`` asks for (``ASYA_REPORTER=http``), else ``None`` (the store reporter applies)."""
    if config.reporter != "http":
        return None
    try:
        import httpx  # noqa: F401 - checked here so a missing package fails the runtime's construction, not a post
    except ImportError:
        raise ConfigError("ASYA_REPORTER=http needs the httpx package: pip install httpx") from None
    gateway = GatewayClient(
        logger=logger,
        api_key_url=config.gateway_url,
        api_key=config.gateway_api_key,
        reporter_key=config.gateway_reporter_key,
    )
    return HttpReporter(store, actor=config.actor, logger=logger, gateway=gateway, default_base=config.gateway_url)
