"""Exception classes of the asya runtime and contract modules. Every class name ends in ``Error``."""

from __future__ import annotations

__all__ = [
    "AbiProtocolError",
    "AsyaError",
    "EnvelopeParseError",
    "HandlerLoadError",
    "HopHeldError",
    "ManifestError",
    "NamingError",
    "PreflightReadError",
    "SerializationError",
    "TaskCanceledError",
]


class AsyaError(Exception):
    """Base class of every error raised by this project."""


class NamingError(AsyaError, ValueError):
    """A name (actor, namespace, flow, queue) violates the naming rules (P-NAME-1..6)."""


class ManifestError(AsyaError, ValueError):
    """The manifest is invalid; the message names the field path and the bad value (P-MAN-1)."""


class EnvelopeParseError(AsyaError, ValueError):
    """A message body is not a valid envelope (P-ENV-9 .. P-ENV-12): reason ``ParseError``."""


class HandlerLoadError(AsyaError):
    """The user handler could not be loaded (P-ABI-2): reason ``HandlerLoadError``."""


class SerializationError(AsyaError, TypeError):
    """A frame, FLY or SET value cannot be encoded as JSON (P-ABI-19, P-ABI-20)."""


class AbiProtocolError(AsyaError, ValueError):
    """A generator sent a malformed ABI command (P-ABI-14)."""


class HopHeldError(AsyaError):
    """Another run holds this hop's claim under a live lease (P-ACK-8): the record fails and comes back when the lease
    ends (``remaining_seconds``)."""

    def __init__(self, message: str, *, remaining_seconds: int) -> None:
        super().__init__(message)
        self.remaining_seconds = remaining_seconds


class PreflightReadError(AsyaError):
    """The batch's pre-flight read failed, and this envelope is a fan-out child: its claim is on its own item and
    does not read the task, so without the pre-flight a copy of a claimed hop of an ended task would run again
    (P-STAT-10). The record fails and comes back to a pre-flight that reads."""


class TaskCanceledError(AsyaError):
    """The task was canceled while its generator handler ran (P-CANCEL-1..5): thrown into the generator at its next
    ``yield``, where the handler may clean up. A handler need not catch it; whatever the generator does after it, the
    hop ends ``canceled`` (no retry, no ``failed`` status)."""
