"""Telling overload from a bug: which AWS failures mean "slow down and retry" (docs/http.md GW-OVL-2, GW-OVL-3).

:func:`overload_of` walks an exception and its causes and answers:

- :attr:`Overload.THROTTLED` when AWS refused the call for its rate (a throttling error code of DynamoDB, SQS,
  Lambda, S3, KMS or any other service, :data:`THROTTLE_CODES`): the gateway answers 429;
- :attr:`Overload.UNAVAILABLE` when AWS could not answer in time (a 5xx error code, :data:`UNAVAILABLE_CODES`, or a
  connect/read timeout, a refused connection): the gateway answers 503;
- ``None`` for everything else, which stays what it is (a bug is still a 500).

Only error codes (``ClientError.response["Error"]["Code"]``) and exception classes are read, never messages. A
code may carry a service prefix (``KMS.ThrottlingException``); the part after the last dot counts.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

__all__ = [
    "DEFAULT_RETRY_AFTER_SECONDS",
    "THROTTLE_CODES",
    "UNAVAILABLE_CODES",
    "Overload",
    "error_code",
    "overload_of",
]

#: ``Retry-After`` (seconds) of an overload answer, the gateway's and API Gateway's (GW-OVL-2, GW-OVL-6), until the
#: deployment derives it from a declared capacity. A throttle of DynamoDB, SQS or Lambda usually clears within a
#: second or two as capacity scales; a longer wait only slows the client down.
DEFAULT_RETRY_AFTER_SECONDS: Final = 2


class Overload(StrEnum):
    """Why a call failed when it is the load's doing, not the request's."""

    THROTTLED = "throttled"
    UNAVAILABLE = "unavailable"


#: Error codes by which AWS services say a caller exceeded a rate or a capacity (botocore's standard retry mode
#: retries the same set; ``ProvisionedThroughputExceededException`` is also a throttled on-demand table or index).
THROTTLE_CODES: Final = frozenset(
    {
        "BandwidthLimitExceeded",
        "EC2ThrottledException",
        "KmsThrottled",
        "LimitExceededException",
        "OverLimit",
        "PriorRequestNotComplete",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ThrottledException",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "TransactionInProgressException",
    }
)

#: Error codes of a service that could not serve the call just now (HTTP 5xx), and of a request that timed out.
UNAVAILABLE_CODES: Final = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)

_UNAVAILABLE_ERRORS: Final = (ConnectTimeoutError, ReadTimeoutError, EndpointConnectionError, ConnectionClosedError)


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a ``ClientError``, without a service prefix; ``None`` for anything else."""
    if not isinstance(exc, ClientError):
        return None
    code = exc.response.get("Error", {}).get("Code")
    return str(code).rsplit(".", 1)[-1] if code else None


def overload_of(exc: BaseException) -> Overload | None:
    """Whether ``exc``, or an exception it was raised from, is AWS throttling or unavailability."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = error_code(current)
        if code in THROTTLE_CODES:
            return Overload.THROTTLED
        if code in UNAVAILABLE_CODES:
            return Overload.UNAVAILABLE
        if isinstance(current, ClientError):
            status = current.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(status, int) and status in (502, 503, 504):
                return Overload.UNAVAILABLE
        if isinstance(current, _UNAVAILABLE_ERRORS):
            return Overload.UNAVAILABLE
        current = current.__cause__ or current.__context__
    return None
