"""A Lambda runtime emulator for one function: run as a script by a host interpreter started with ``-I -S``.

    python -I -S _bootstrap.py '<json: {"path": [...], "handler": "module.function"}>'

It imports nothing of the asya packages: ``sys.path`` becomes exactly the given ``path`` (the function's code
directory, its layers' ``python`` directories, the restaged dependency directory) followed by the interpreter's own
standard library and then the last entry of ``path`` (the runtime's boto3 directory), as Lambda orders
``/var/task``, ``/opt/python``, the runtime and ``/var/runtime``. The original stdout is kept as the control channel
and fd 1 then points at stderr, so whatever the function prints reaches the log, never the channel.

Protocol, one JSON object per line: the emulator writes ``{"ready": true}`` once the handler is imported (or
``{"ready": false, "error": {...}}``, and then answers every invocation with that error, as Lambda reports
``Runtime.ImportModuleError``); then for each ``{"event": ..., "context": {...}}`` read from stdin it writes
``{"result": ...}`` or ``{"error": {"errorMessage", "errorType", "stackTrace"}}``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any


class _Context:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.function_name = fields["function_name"]
        self.function_version = fields.get("function_version", "$LATEST")
        self.invoked_function_arn = fields["invoked_function_arn"]
        self.memory_limit_in_mb = int(fields["memory_limit_in_mb"])
        self.aws_request_id = fields["aws_request_id"]
        self.log_group_name = fields.get("log_group_name", "")
        self.log_stream_name = fields.get("log_stream_name", "")
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + float(fields["remaining_ms"]) / 1000.0

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": type(exc).__name__,
        "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__),
    }


def main() -> None:
    config = json.loads(sys.argv[1])
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdlib = [p for p in sys.path if p and not p.endswith("_bootstrap.py")]
    *own, runtime = config["path"]
    sys.path[:] = [*own, *stdlib, runtime]
    module_name, _, function_name = config["handler"].rpartition(".")
    handler: Callable[[Any, _Context], Any] | None = None
    init_error: dict[str, Any] | None = None
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:
        init_error = _error(exc)
        init_error["errorType"] = "Runtime.ImportModuleError"
    channel.write(json.dumps({"ready": init_error is None, "error": init_error}) + "\n")
    channel.flush()
    for line in sys.stdin:
        request = json.loads(line)
        answer: dict[str, Any]
        if init_error is not None or handler is None:
            answer = {"error": init_error}
        else:
            try:
                answer = {"result": handler(request["event"], _Context(request["context"]))}
            except Exception as exc:
                answer = {"error": _error(exc)}
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError) as exc:
            text = json.dumps(
                {
                    "error": {
                        "errorMessage": f"Unable to marshal response: {exc}",
                        "errorType": "Runtime.MarshalError",
                        "stackTrace": [],
                    }
                }
            )
        channel.write(text + "\n")
        channel.flush()


if __name__ == "__main__":
    main()
