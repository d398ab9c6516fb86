"""asya: the sidecar library of asya-serverless, shipped as a Lambda layer.

The contract modules (``envelope``, ``naming``, ``manifest``, ``store``) are shared with the gateway, the local mode
and the CDK app. Importing this package has no side effects: no AWS clients, no configuration reads.
"""

from __future__ import annotations

from asya.envelope import Envelope, Phase, Reason, Route, Status, parse_envelope
from asya.exceptions import (
    AbiProtocolError,
    AsyaError,
    EnvelopeParseError,
    HandlerLoadError,
    ManifestError,
    NamingError,
    SerializationError,
    TaskCanceledError,
)

__all__ = [
    "AbiProtocolError",
    "AsyaError",
    "Envelope",
    "EnvelopeParseError",
    "HandlerLoadError",
    "ManifestError",
    "NamingError",
    "Phase",
    "Reason",
    "Route",
    "SerializationError",
    "Status",
    "TaskCanceledError",
    "parse_envelope",
]

__version__ = "0.1.0"
