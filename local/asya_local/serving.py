"""uvicorn serving an ASGI app from a daemon thread, on a socket bound before the thread starts.

The local mesh's gateway and the artifact mesh's API front and signer are served this way. ``port=0`` picks a free
port (``url`` and ``bound`` tell which); with ``fallback`` a port already in use is replaced by a free one and
``port_was_busy`` says so. ``start()`` returns once uvicorn serves (its lifespan startup done, when the app takes one).
``stop()`` closes the listening socket, lets requests under way finish for ``grace_seconds``, cancels what is still
running, runs the lifespan shutdown, and then aborts every connection left open. uvicorn's own graceful shutdown
leaves those connections' transports open once their tasks are cancelled, and the loop ends with them: each would be
collected later as an unclosed socket (a ``ResourceWarning`` in whatever code happens to run then).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
import time
from typing import Any, Final, Literal

from asya_gateway.headerlimit import READ_HEAD_BYTES
from asya_local.exceptions import LocalModeError

__all__ = ["UvicornThread"]

_START_POLL_SECONDS: Final = 0.02
#: How long ``stop()`` waits for the thread after the grace period and the lifespan shutdown.
_JOIN_SECONDS: Final = 10.0


def _bound_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _closing_server(config: Any) -> Any:
    import uvicorn

    class _ClosingServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    transport.abort()
            await asyncio.sleep(0)  # the aborts' connection_lost callbacks close the sockets before the loop ends

    return _ClosingServer(config)


class UvicornThread:
    """One ASGI app served on ``host:port`` from a daemon thread named ``name``; errors call it ``label``."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "asya-http",
        label: str = "the server",
        grace_seconds: int = 2,
        lifespan: Literal["auto", "on", "off"] = "auto",
        fallback: bool = False,
    ) -> None:
        import uvicorn

        self.app = app
        self._label = label
        self.port_was_busy = False
        try:
            self._socket = _bound_socket(host, port)
        except OSError as exc:
            if not (fallback and port != 0 and exc.errno == errno.EADDRINUSE):
                raise LocalModeError(
                    f"cannot serve {label} on {host}:{port}: {exc.strerror} (pick another port; 0 picks a free one)"
                ) from None
            self.port_was_busy = True
            try:
                self._socket = _bound_socket(host, 0)
            except OSError as retry_exc:
                raise LocalModeError(f"cannot serve {label} on {host}: {retry_exc.strerror}") from None
        bound_host, bound_port = self._socket.getsockname()[:2]
        self.bound: tuple[str, int] = (bound_host, bound_port)
        self.port = int(bound_port)
        self.url = f"http://{bound_host}:{bound_port}"
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan=lifespan,
            timeout_graceful_shutdown=grace_seconds,
            # read oversize heads whole, so the gateway answers them 431 (GW-GEN-10) instead of h11 resetting
            h11_max_incomplete_event_size=READ_HEAD_BYTES,
        )
        self._server = _closing_server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=name, daemon=True
        )

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise LocalModeError(f"{self._label} on {self.url} stopped during startup")
            if time.monotonic() > deadline:
                raise LocalModeError(f"{self._label} on {self.url} did not start within {timeout} s")
            time.sleep(_START_POLL_SECONDS)

    def stop(self, *, grace_seconds: int | None = None) -> None:
        if grace_seconds is not None:
            self._server.config.timeout_graceful_shutdown = grace_seconds
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join((self._server.config.timeout_graceful_shutdown or 0) + _JOIN_SECONDS)
        self._socket.close()
