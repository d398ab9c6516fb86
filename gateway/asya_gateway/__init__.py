"""asya_gateway: the HTTP gateway of asya-serverless, one Starlette ASGI app (docs/http.md).

``create_app`` builds it (``drain`` ends its SSE streams before its server stops); ``GatewayConfig`` is its
environment. Served by uvicorn locally and by the AWS Lambda Web
Adapter in AWS (``run.sh``). Importing this package has no side effects.
"""

from __future__ import annotations

from asya_gateway.app import create_app, drain
from asya_gateway.backstop import Backstop, SweepResult, TimerBatchResult
from asya_gateway.config import GatewayConfig, GatewayConfigError
from asya_gateway.timers import DeadlineTimers, Timer, TimerError
from asya_gateway.version import VERSION

__all__ = [
    "VERSION",
    "Backstop",
    "DeadlineTimers",
    "GatewayConfig",
    "GatewayConfigError",
    "SweepResult",
    "Timer",
    "TimerBatchResult",
    "TimerError",
    "create_app",
    "drain",
]

__version__ = VERSION
