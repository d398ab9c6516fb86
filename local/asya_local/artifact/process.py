"""One Lambda function as one child interpreter (:class:`FunctionProcess`), and the environment Lambda gives it.

The child is this machine's Python started with ``-I -S -B`` on the script ``_bootstrap.py`` (no ``PYTHON*`` variable,
no site-packages, not even the script's own directory: the source tree is never on its path; no bytecode written
next to the staged code, which Lambda keeps read-only). Its ``sys.path`` is
the function's staged code directory, then each layer as Lambda lays it out (``<layer>/python``; a dependency layer
replaced by its host restaging), then the runtime's boto3 directory. :meth:`FunctionProcess.invoke` sends one event
and waits for the answer; an answer that does not come within the function's timeout kills the process and starts a
new one (Lambda's timeout: the invocation fails and the next one gets a fresh environment), and a handler error is a
:class:`FunctionError` carrying Lambda's ``errorType``/``errorMessage``. Invocations of one process run one at a
time, as in one Lambda execution environment.

:func:`lambda_environment` is what Lambda sets: the template's variables, then ``AWS_REGION``,
``AWS_DEFAULT_REGION``, ``AWS_LAMBDA_FUNCTION_NAME``, ``AWS_LAMBDA_FUNCTION_MEMORY_SIZE``,
``AWS_LAMBDA_FUNCTION_VERSION``, ``AWS_LAMBDA_LOG_GROUP_NAME``, ``AWS_LAMBDA_LOG_STREAM_NAME``, ``_HANDLER``,
``LAMBDA_TASK_ROOT``, ``LAMBDA_RUNTIME_DIR``, ``AWS_EXECUTION_ENV``, ``TZ``, ``LANG``, the function's own
credentials and ``AWS_ENDPOINT_URL``. Paths under ``/var/task`` in the template's values point at the staged code
directory instead (there is no ``/var/task`` here); ``AWS_LAMBDA_EXEC_WRAPPER`` (the Web Adapter's ``/opt/bootstrap``,
a public layer not in the assembly) is left out: :mod:`asya_local.artifact.webadapter` plays its part.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext

__all__ = ["BOOTSTRAP", "Credentials", "FunctionError", "FunctionProcess", "lambda_environment"]

_log = logging.getLogger(__name__)

BOOTSTRAP: Final = Path(__file__).resolve().with_name("_bootstrap.py")
_STARTUP_SECONDS: Final = 180.0


class FunctionError(LocalModeError):
    """An invocation failed as Lambda reports it: ``error_type`` is the handler's exception class (or
    ``Runtime.ImportModuleError``, ``Sandbox.Timedout``, ``Runtime.ExitError``)."""

    def __init__(self, function: str, error_type: str, message: str) -> None:
        super().__init__(f"{function}: {error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


@dataclass(frozen=True, slots=True)
class Credentials:
    """A function's own fake credentials: the access key id tells its calls apart at the IAM proxy."""

    access_key_id: str
    secret_access_key: str
    session_token: str

    @classmethod
    def new(cls, label: str) -> Credentials:
        digits = "".join(c for c in label.upper() if c.isalnum())[:8].ljust(8, "X")
        return cls(f"ASIA{digits}{secrets.token_hex(4).upper()}", secrets.token_hex(20), secrets.token_hex(24))


def lambda_environment(
    *,
    variables: Mapping[str, str],
    function_name: str,
    handler: str,
    memory: int,
    region: str,
    code_dir: Path,
    runtime_dir: Path,
    credentials: Credentials,
    endpoint_url: str,
    path: str = "/usr/local/bin:/usr/bin:/bin",
) -> dict[str, str]:
    env = {
        key: value.replace("/var/task", str(code_dir))
        for key, value in variables.items()
        if key != "AWS_LAMBDA_EXEC_WRAPPER"
    }
    env.update(
        {
            "AWS_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "AWS_LAMBDA_FUNCTION_NAME": function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function_name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local",
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.14",
            "_HANDLER": handler,
            "LAMBDA_TASK_ROOT": str(code_dir),
            "LAMBDA_RUNTIME_DIR": str(runtime_dir),
            "TZ": ":UTC",
            "LANG": "en_US.UTF-8",
            "PATH": path,
            "AWS_ACCESS_KEY_ID": credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
            "AWS_SESSION_TOKEN": credentials.session_token,
            "AWS_ENDPOINT_URL": endpoint_url,
        }
    )
    return env


class FunctionProcess:
    """One function's interpreter. ``start`` waits for its handler import; ``invoke`` is thread-safe (serialised)."""

    def __init__(
        self,
        name: str,
        *,
        handler: str,
        sys_path: list[Path],
        env: Mapping[str, str],
        timeout: float,
        log: IO[str] | None = None,
    ) -> None:
        self.name = name
        self._handler = handler
        self._sys_path = [str(p) for p in sys_path]
        self._env = dict(env)
        self._timeout = timeout
        self._log = log
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._answers: list[str] = []
        self._answered = threading.Condition()
        self.restarts = 0
        self.init_error: dict[str, Any] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        config = json.dumps({"path": self._sys_path, "handler": self._handler})
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(BOOTSTRAP), config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log if self._log is not None else None,
            env=self._env,
            cwd=self._env.get("LAMBDA_TASK_ROOT"),
            text=True,
            encoding="utf-8",
        )
        self._process = process
        self._answers = []
        self._reader = threading.Thread(target=self._read, args=(process,), name=f"fn-{self.name}", daemon=True)
        self._reader.start()
        ready = self._next_answer(process, _STARTUP_SECONDS)
        if ready is None:
            self._kill()
            raise LocalModeError(f"{self.name}: the function's runtime did not start within {_STARTUP_SECONDS} s")
        self.init_error = ready.get("error")

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._answered:
                self._answers.append(line)
                self._answered.notify_all()
        with self._answered:
            self._answers.append("")  # end of file: the process is gone
            self._answered.notify_all()

    def _next_answer(self, process: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
        with self._answered:
            if not self._answered.wait_for(lambda: bool(self._answers), timeout):
                return None
            line = self._answers.pop(0)
        if not line:
            code = process.wait()
            return {"error": {"errorType": "Runtime.ExitError", "errorMessage": f"exited with code {code}"}}
        answer: dict[str, Any] = json.loads(line)
        return answer

    def invoke(self, event: Any, context: LambdaContext) -> Any:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self.restarts += 1
                self._spawn()
            process = self._process
            assert process is not None and process.stdin is not None
            remaining = context.get_remaining_time_in_millis()
            request = {
                "event": event,
                "context": {
                    "function_name": context.function_name,
                    "invoked_function_arn": context.invoked_function_arn,
                    "memory_limit_in_mb": context.memory_limit_in_mb,
                    "aws_request_id": context.aws_request_id,
                    "log_group_name": context.log_group_name,
                    "log_stream_name": context.log_stream_name,
                    "remaining_ms": remaining,
                },
            }
            try:
                process.stdin.write(json.dumps(request) + "\n")
                process.stdin.flush()
            except OSError as exc:
                self._kill()
                raise FunctionError(self.name, "Runtime.ExitError", str(exc)) from None
            answer = self._next_answer(process, remaining / 1000.0 + 1.0)
            if answer is None:
                # Lambda stops the environment at its timeout; the next invocation starts a new one
                self._kill()
                raise FunctionError(
                    self.name, "Sandbox.Timedout", f"Task timed out after {remaining / 1000:.2f} seconds"
                )
            if "error" in answer and answer["error"] is not None:
                error = answer["error"]
                if error.get("errorType") == "Runtime.ExitError":
                    self._process = None
                    self._close(process)
                raise FunctionError(self.name, str(error.get("errorType")), str(error.get("errorMessage")))
            return answer.get("result")

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        self._close(process)

    def _close(self, process: subprocess.Popen[str]) -> None:
        """Close the pipes once the reader has seen the end of the output (closing under it would break its read)."""
        if self._reader is not None:
            self._reader.join(5)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()

    def stop(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            if process is None:
                return
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.close()  # end of input: the emulator's loop ends
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self._close(process)
