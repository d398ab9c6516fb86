"""How one function of the assembly runs on this machine: :class:`FunctionLauncher` builds its interpreters.

A plain function runs in :class:`~asya_local.artifact.process.FunctionProcess` interpreters (``sys.path``: its code
directory, its layers, a dependency layer restaged for this machine by :mod:`~asya_local.artifact.restage`, then the
host's copies of Lambda's runtime); a web function (the Lambda Web Adapter's: ``AWS_LWA_INVOKE_MODE`` or
``AWS_LAMBDA_EXEC_WRAPPER`` in its environment, :func:`is_web`) runs as a
:class:`~asya_local.artifact.webadapter.WebAdapterProcess`. Both get Lambda's environment
(:func:`~asya_local.artifact.process.lambda_environment`) with the function's own credentials and the endpoint its AWS
calls go to. With a ``log_dir``, each function writes ``<logical id>.log`` there (appended; closed by
:meth:`FunctionLauncher.close`). :func:`start_all` starts pools and web functions concurrently and raises one error
naming every failure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO

from asya_local.artifact.functions import FunctionPool
from asya_local.artifact.model import FunctionSpec
from asya_local.artifact.process import Credentials, FunctionProcess, lambda_environment
from asya_local.artifact.restage import Restager, is_dependency_layer
from asya_local.artifact.webadapter import WebAdapterProcess
from asya_local.exceptions import LocalModeError

__all__ = ["FunctionLauncher", "is_web", "start_all"]


def is_web(function: FunctionSpec) -> bool:
    return "AWS_LWA_INVOKE_MODE" in function.environment or "AWS_LAMBDA_EXEC_WRAPPER" in function.environment


class FunctionLauncher:
    """Interpreters of the assembly's functions, each under ``credentials[function.arn]`` (module docstring)."""

    def __init__(
        self,
        *,
        cache_dir: Path,
        region: str,
        credentials: Mapping[str, Credentials],
        log_dir: Path | None = None,
    ) -> None:
        self._restager = Restager(cache_dir)
        self._region = region
        self._credentials = credentials
        self._log_dir = log_dir
        self._logs: list[IO[str]] = []
        self._runtime_dir: Path | None = None

    @property
    def runtime_dir(self) -> Path:
        if self._runtime_dir is None:
            self._runtime_dir = self._restager.runtime_dir()
        return self._runtime_dir

    def process_factory(self, function: FunctionSpec, endpoint: str) -> Callable[[], FunctionProcess]:
        """A new interpreter of ``function`` per call (a pool's execution environments)."""
        if function.external_layers:
            raise LocalModeError(
                f"function {function.logical_id}: external layers {list(function.external_layers)} are not in the "
                "assembly and not emulated"
            )
        sys_path = [function.code_dir, *self._layer_paths(function), self.runtime_dir]
        env = self._environment(function, endpoint)
        log = self._log(function.logical_id)

        def new() -> FunctionProcess:
            return FunctionProcess(
                function.name, handler=function.handler, sys_path=sys_path, env=env, timeout=function.timeout, log=log
            )

        return new

    def web_process(self, function: FunctionSpec, endpoint: str, *, taken: Iterable[int]) -> WebAdapterProcess:
        """``function`` as the Lambda Web Adapter runs it, on a port not in ``taken``."""
        # built in the starting thread: restaging a layer is not safe from two threads at once
        return WebAdapterProcess(
            function.name,
            code_dir=function.code_dir,
            handler=function.handler,
            env=self._environment(function, endpoint),
            python_path=self._layer_paths(function),
            log=self._log(function.logical_id),
            taken=set(taken),
        )

    def close(self) -> None:
        for handle in self._logs:
            handle.close()
        self._logs.clear()

    def _layer_paths(self, function: FunctionSpec) -> list[Path]:
        paths: list[Path] = []
        for layer in function.layer_dirs:
            if is_dependency_layer(layer):
                paths.append(self._restager.restage(layer))
            else:
                paths.append(layer / "python")
        return paths

    def _environment(self, function: FunctionSpec, endpoint: str) -> dict[str, str]:
        return lambda_environment(
            variables=function.environment,
            function_name=function.name,
            handler=function.handler,
            memory=function.memory,
            region=self._region,
            code_dir=function.code_dir,
            runtime_dir=self.runtime_dir,
            credentials=self._credentials[function.arn],
            endpoint_url=endpoint,
            path=os.environ.get("PATH", "/usr/bin:/bin"),
        )

    def _log(self, name: str) -> IO[str] | None:
        if self._log_dir is None:
            return None
        self._log_dir.mkdir(parents=True, exist_ok=True)
        handle = (self._log_dir / f"{name}.log").open("a", encoding="utf-8")
        self._logs.append(handle)
        return handle


def start_all(pools: Iterable[FunctionPool], webs: Iterable[WebAdapterProcess]) -> None:
    """Every pool's first interpreter and every web function, concurrently; all their errors in one."""
    errors: list[str] = []

    def start(pool: FunctionPool) -> None:
        try:
            process = pool.start()
        except LocalModeError as exc:
            errors.append(str(exc))
            return
        if process.init_error is not None:
            errors.append(
                f"{pool.name}: {process.init_error.get('errorType')}: {process.init_error.get('errorMessage')}"
            )

    def start_web(web: WebAdapterProcess) -> None:
        try:
            web.start()
        except LocalModeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=start, args=(pool,)) for pool in pools]
    threads += [threading.Thread(target=start_web, args=(web,)) for web in webs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise LocalModeError("functions failed to initialise: " + "; ".join(sorted(errors)))
