"""moto's HTTP server in a thread, and boto3 clients pointed at any endpoint.

``MotoServer`` binds moto's ``ThreadedMotoServer`` to ``127.0.0.1`` (never all interfaces) on port 0 by default and
discovers the real port after start; ``endpoint_url`` is ``http://127.0.0.1:<port>``. Every service shares the one
endpoint, so state is visible to every client (and every process) that uses it.

``stop()`` resets moto's state before shutting the server down.

Speed: moto's dispatcher tells service hosts apart by listing its own package directory (a ``listdir`` and one
``isdir`` per entry, some 300 system calls) twice per request. The package cannot change while the process runs, so
``start()`` replaces that listing with its result, taken once: same answer, about a tenth less server CPU per
request, which is most of what a local hop waits for (``make bench``, section 4).

``make_clients(endpoint_url)`` is the only place that knows the mesh is local: with an endpoint it passes fake
credentials and the region explicitly to each client (nothing is read from the environment); with ``None`` it builds
ordinary clients for real AWS from the default credential chain.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import boto3
import httpx
from botocore.config import Config

from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = ["DEFAULT_REGION", "FAKE_CREDENTIALS", "AwsClients", "MotoServer", "make_clients"]

DEFAULT_REGION: Final = "us-east-1"
#: moto accepts any credentials; these make sure a misconfigured endpoint can never sign for a real account.
FAKE_CREDENTIALS: Final = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "aws_session_token": "testing",
}


@dataclass(frozen=True, slots=True)
class AwsClients:
    """The three clients the mesh uses, and the endpoint they talk to (``None``: real AWS)."""

    sqs: SQSClient
    dynamodb: DynamoDBClient
    s3: S3Client
    endpoint_url: str | None
    region: str


def make_clients(endpoint_url: str | None, *, region: str = DEFAULT_REGION) -> AwsClients:
    """boto3 clients for SQS, DynamoDB and S3 at ``endpoint_url`` (fake credentials), or real AWS when ``None``."""
    session = boto3.Session()
    kwargs: dict[str, Any] = {"region_name": region}
    s3_config = None
    if endpoint_url is not None:
        kwargs.update(endpoint_url=endpoint_url, **FAKE_CREDENTIALS)
        # A bare host:port cannot carry virtual-hosted bucket names.
        s3_config = Config(s3={"addressing_style": "path"})
    return AwsClients(
        sqs=session.client("sqs", **kwargs),
        dynamodb=session.client("dynamodb", **kwargs),
        s3=session.client("s3", config=s3_config, **kwargs),
        endpoint_url=endpoint_url,
        region=region,
    )


class MotoServer:
    """moto's server on ``host:port`` in a daemon thread. Use as a context manager or call ``start``/``stop``."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: ThreadedMotoServer | None = None
        self._bound: tuple[str, int] | None = None

    @property
    def endpoint_url(self) -> str:
        if self._bound is None:
            raise LocalModeError("moto server is not running: call start() first")
        host, port = self._bound
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        if self._bound is None:
            raise LocalModeError("moto server is not running: call start() first")
        return self._bound[1]

    def start(self) -> None:
        if self._server is not None:
            return
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        # werkzeug logs every request at INFO to stderr unless its logger is configured; keep only warnings.
        werkzeug_logger = logging.getLogger("werkzeug")
        if werkzeug_logger.level == logging.NOTSET:
            werkzeug_logger.setLevel(logging.WARNING)
        if self._port:
            _check_port_free(self._host, self._port)
        _list_moto_modules_once()
        server = ThreadedMotoServer(ip_address=self._host, port=self._port, verbose=False)
        server.start()
        self._server = server
        self._bound = server.get_host_and_port()

    def stop(self) -> None:
        """Discard the server's state and shut it down. moto keeps its backends in process globals, so without the
        reset a later server in the same process would start with this one's queues, tables and objects."""
        if self._server is None:
            return
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{self.endpoint_url}/moto-api/reset", timeout=10)
        self._server.stop()
        self._server = None
        self._bound = None

    def clients(self, *, region: str = DEFAULT_REGION) -> AwsClients:
        """Clients pointed at this server."""
        return make_clients(self.endpoint_url, region=region)

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _list_moto_modules_once() -> None:
    from moto import backends

    listing = backends.list_of_moto_modules
    if getattr(listing, "_asya_once", False):
        return
    modules = tuple(listing())

    def listed() -> Iterable[str]:
        return modules

    setattr(listed, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    setattr(backends, "list_of_moto_modules", listed)  # noqa: B010 - module attribute: moto looks it up per call


def _check_port_free(host: str, port: int) -> None:
    # ThreadedMotoServer binds inside its thread and would wait forever for a port that is taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise LocalModeError(f"cannot start moto on {host}:{port}: {exc.strerror}") from None
