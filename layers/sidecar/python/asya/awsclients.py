"""The one place where the mesh's AWS clients get their retry mode and timeouts (docs/http.md GW-OVL-1).

Left to itself, botocore picks the ``legacy`` retry mode, or whatever the runtime's config file says: a DynamoDB call
may then be tried 10 times with about 25 s of backoff, and a read waits 60 s for a silent socket. A caller with a
short budget (a gateway request, which should answer within a few seconds) is held far past it and then answers
500. So every client of the gateway, the actors, the crew, the backstop and the local mesh is built here, with a
:class:`ClientBudget` that fits its caller:

- :data:`GATEWAY_BUDGET`: one retry and short socket timeouts, so a throttled or silent service is reported to the
  client (429/503 with ``Retry-After``, :mod:`asya.overload`) within a few seconds instead of being waited out;
- :data:`ACTOR_BUDGET`: the actors and crew inside a Lambda invocation (minutes of budget, a visibility timeout
  behind it), which ride out a short throttle rather than fail the record;
- :data:`BACKSTOP_BUDGET`: the timer/sweep function, which retries a task on its next run;
- :data:`LOCAL_BUDGET`: the local mesh on one machine, where moto under load may take seconds to answer and a
  short read timeout would fail healthy calls.

Every budget uses the ``standard`` retry mode: exponential backoff with jitter, the same retryable codes in every
service, and a retry quota that stops retry storms. ``adaptive`` adds a client-side rate limiter that sleeps in the
caller's thread; a gateway answers 429 instead, and one Lambda container's limiter knows too little of the
account's load to help.

Clients are created lazily by their owners (:func:`aws_client` is called on first use), never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "ACTOR_BUDGET",
    "BACKSTOP_BUDGET",
    "GATEWAY_BUDGET",
    "LOCAL_BUDGET",
    "ClientBudget",
    "aws_client",
    "client_config",
]


@dataclass(frozen=True, slots=True)
class ClientBudget:
    """How long one AWS call may take: ``max_attempts`` (the first try included) of at most ``connect_timeout`` +
    ``read_timeout`` seconds each (the read timeout bounds each wait for the socket, not the whole transfer)."""

    name: str
    connect_timeout: float
    read_timeout: float
    max_attempts: int
    retry_mode: Literal["standard", "adaptive"] = "standard"

    def __post_init__(self) -> None:
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ValueError(f"client budget {self.name}: timeouts must be positive")
        if self.max_attempts < 1:
            raise ValueError(f"client budget {self.name}: max_attempts must be at least 1, got {self.max_attempts}")


#: A gateway request: 2 attempts of at most 1 + 3 s, with at most about 1 s of jittered backoff between them, so a
#: throttled call is answered 429/503 in about 1 s and a silent service in under 10 s.
GATEWAY_BUDGET: Final = ClientBudget("gateway", connect_timeout=1.0, read_timeout=3.0, max_attempts=2)
#: An actor or crew invocation: 4 attempts (backoff of at most 1, 2, 4 s) ride out a short throttle; a longer one
#: fails the record and SQS redelivers it under the actor's retry policy.
ACTOR_BUDGET: Final = ClientBudget("actor", connect_timeout=2.0, read_timeout=10.0, max_attempts=4)
#: The backstop (deadline timers and the sweep): a throttled timer message comes back from its queue, a throttled
#: sweep item is taken on the next run.
BACKSTOP_BUDGET: Final = ClientBudget("backstop", connect_timeout=2.0, read_timeout=10.0, max_attempts=3)
#: The local mesh and its tools, on moto: a busy machine may answer slowly, and nothing there is throttled.
LOCAL_BUDGET: Final = ClientBudget("local", connect_timeout=10.0, read_timeout=60.0, max_attempts=3)


def client_config(budget: ClientBudget, **overrides: Any) -> Any:
    """The ``botocore.config.Config`` of ``budget`` (``overrides``: further ``Config`` fields, e.g. S3's path-style
    addressing)."""
    from botocore.config import Config  # deferred: the module is imported by code that never makes a client

    return Config(
        connect_timeout=budget.connect_timeout,
        read_timeout=budget.read_timeout,
        # total_max_attempts counts the first try; botocore's max_attempts would count retries only
        retries={"mode": budget.retry_mode, "total_max_attempts": budget.max_attempts},
        **overrides,
    )


def aws_client(service: str, budget: ClientBudget, *, session: Any = None, config: Any = None, **kwargs: Any) -> Any:
    """A client of ``service`` with ``budget``'s retry mode and timeouts (``session``: a ``boto3.Session``, default
    boto3's default session; ``config``: a ``Config`` merged over the budget's; ``kwargs``: region, endpoint,
    credentials)."""
    merged = client_config(budget)
    if config is not None:
        merged = merged.merge(config)
    if session is None:
        import boto3  # deferred: importing boto3 costs ~150 ms of a cold start that may never need it

        return boto3.client(service, config=merged, **kwargs)  # type: ignore[call-overload]
    return session.client(service, config=merged, **kwargs)
