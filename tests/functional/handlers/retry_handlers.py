"""User handlers for the retry functional tests (PROTOCOL section 8), loaded through ASYA_CODE_DIR."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class RateLimitedError(ConnectionError):
    """A custom error whose MRO holds ``ConnectionError`` and ``OSError`` (P-ERR-3, P-RES-3)."""


def mutate_then_fail(payload: dict[str, Any]) -> Any:
    """Mutates its input in place, then raises: a retry must carry the input as received (P-RES-8)."""
    payload["mutated"] = True
    raise ValueError("model returned no text")


def rate_limited(payload: Any) -> Any:
    raise RateLimitedError("429 from upstream")


def fails_before_attempt(payload: dict[str, Any]) -> Iterator[Any]:
    """Raises until ``status.attempt`` reaches ``payload["succeed_at"]`` (read through the ABI, P-PROC-4)."""
    attempt = yield ("GET", ".status.attempt")
    if attempt < payload["succeed_at"]:
        raise TimeoutError(f"attempt {attempt} timed out")
    yield {**payload, "succeeded_on": attempt}


def frame_then_fail(payload: dict[str, Any]) -> Iterator[Any]:
    """One frame, then an error: a partial failure, never retried (P-RES-10, R2)."""
    attempt = yield ("GET", ".status.attempt")
    yield {**payload, "sent_on": attempt}
    raise ValueError(f"failed after its frame on attempt {attempt}")


def unserialisable(payload: Any) -> float:
    """A frame that cannot be encoded (P-ABI-20): ``SerializationError``, an infrastructure error (P-ERR-2)."""
    return float("nan")


def long_error(payload: dict[str, Any]) -> Any:
    """Raises with a message of ``payload["size"]`` characters (an exception can carry a whole model response)."""
    raise ValueError("e" * payload["size"])
