"""JSON log lines for the ``asya_gateway`` loggers (GW-GEN-4: the request id is logged with every access line).

Under the Lambda Web Adapter the app runs in a uvicorn process that configures only uvicorn's own loggers, so the
factory path of :func:`asya_gateway.app.create_app` calls :func:`configure_logging`; an embedding process keeps its
own logging setup, and may write the same lines to a stream of its own for a while with :func:`json_lines_to`
(``asya dev`` sends them to its stderr). Each line is one JSON object: ``level``, ``logger``, ``message``,
``timestamp`` and the record's extras (``request_id``, ``method``, ``path``, ``status``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from typing import Final, TextIO

__all__ = ["JsonFormatter", "configure_logging", "json_lines_to"]

_EXTRAS: Final = ("request_id", "method", "path", "status")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "timestamp": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
        }
        for name in _EXTRAS:
            if name in record.__dict__:
                line[name] = record.__dict__[name]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    """Send ``asya_gateway`` logs to stdout as JSON lines, once per process."""
    logger = logging.getLogger("asya_gateway")
    if any(isinstance(handler.formatter, JsonFormatter) for handler in logger.handlers):
        return
    logger.addHandler(_json_handler(sys.stdout))
    logger.setLevel(level)
    logger.propagate = False


@contextlib.contextmanager
def json_lines_to(stream: TextIO, level: int = logging.INFO) -> Iterator[None]:
    """Write the ``asya_gateway`` logs to ``stream`` as JSON lines while the context is open, then restore the
    loggers as they were (an embedding process may run several gateways one after the other)."""
    logger = logging.getLogger("asya_gateway")
    handler = _json_handler(stream)
    previous = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous[0])
        logger.propagate = previous[1]


def _json_handler(stream: TextIO) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    return handler
