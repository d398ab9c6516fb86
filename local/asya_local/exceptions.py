"""Exception classes of the local mode and the CLI. Every class name ends in ``Error``."""

from __future__ import annotations

from asya.exceptions import AsyaError

__all__ = ["GatewayAuthError", "GatewayHttpError", "GatewayUnreachableError", "LocalModeError", "SseStreamError"]


class LocalModeError(AsyaError):
    """The local mesh could not start or was used in the wrong state (the message says which part and why)."""


class GatewayUnreachableError(AsyaError):
    """No HTTP server answers at the gateway URL: ``reason`` is ``None`` when the connection was refused (nothing
    listens there), else why the request failed (a name that does not resolve, a timeout, a server that is not HTTP)."""

    def __init__(self, url: str, reason: str | None = None) -> None:
        if reason is None:
            super().__init__(f"no gateway at {url}: start one with `asya dev`")
        else:
            super().__init__(f"cannot reach the gateway at {url}: {reason}")
        self.url = url
        self.reason = reason


class GatewayAuthError(AsyaError):
    """The CLI cannot build the credentials a gateway needs (no AWS credentials, no region, a bad ``ASYA_AUTH``)."""


class GatewayHttpError(AsyaError):
    """The gateway answered an error status; ``message`` is its ``{"error": ...}`` text when it sent one."""

    def __init__(self, status_code: int, message: str, url: str = "") -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.url = url


class SseStreamError(AsyaError):
    """An SSE stream could not be (re)established after the allowed number of attempts."""
