"""moto's HTTP server in a child process, and boto3 clients pointed at any endpoint.

``MotoServer`` runs moto's server in a child process (the script ``asya_local/_moto_child.py``) bound to
``127.0.0.1`` (never all interfaces), on port 0 by default, and learns the real port from the child once it is bound;
``endpoint_url`` is ``http://127.0.0.1:<port>``. Every service shares the one endpoint, so state is visible to every
client (and every process) that uses it.

Why a process and not a thread: moto does most of the work of a local hop (each hop is some ten moto requests), and
in its own process it runs beside the actors, the pollers and the gateway instead of taking turns with them for one
interpreter lock: when this changed, local hops got about a fifth faster and throughput half again as high (``make
bench``, section 4). State lives in the child, so each server starts empty, two servers in one process never share
state, and ``stop()`` (closing the child's stdin; killing it after ``_STOP_SECONDS``) discards everything. The child
also exits when this process dies in any way, since its stdin then reaches end of file.

``make_clients(endpoint_url)`` is the only place that knows the mesh is local: with an endpoint it passes fake
credentials and the region explicitly to each client (nothing is read from the environment); with ``None`` it builds
ordinary clients for real AWS from the default credential chain.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import boto3
from botocore.config import Config

from asya.awsclients import LOCAL_BUDGET, aws_client
from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

__all__ = ["DEFAULT_REGION", "FAKE_CREDENTIALS", "MOTO_ACCOUNT_ID", "AwsClients", "MotoServer", "make_clients"]

DEFAULT_REGION: Final = "us-east-1"
#: The account moto's server answers for: the local mode builds queue URLs with it, as the deployed mesh does with its
#: own account (``ASYA_ACCOUNT_ID``, GW-CREATE-7).
MOTO_ACCOUNT_ID: Final = "123456789012"
#: How long ``stop()`` waits for the child to exit after closing its stdin before killing it.
_STOP_SECONDS: Final = 10.0
_CHILD_SCRIPT: Final = Path(__file__).resolve().with_name("_moto_child.py")
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
        sqs=aws_client("sqs", LOCAL_BUDGET, session=session, **kwargs),
        dynamodb=aws_client("dynamodb", LOCAL_BUDGET, session=session, **kwargs),
        s3=aws_client("s3", LOCAL_BUDGET, session=session, config=s3_config, **kwargs),
        endpoint_url=endpoint_url,
        region=region,
    )


class MotoServer:
    """moto's server on ``host:port`` in a child process. Use as a context manager or call ``start``/``stop``."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 60.0) -> None:
        self._host = host
        self._port = port
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
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

    @property
    def pid(self) -> int:
        """The server process's id."""
        if self._process is None:
            raise LocalModeError("moto server is not running: call start() first")
        return self._process.pid

    def problem(self) -> str | None:
        """``None`` while the server process runs; else why the mesh can no longer use it."""
        process = self._process
        if process is None:
            return "moto server is not running"
        code = process.poll()
        if code is None:
            return None
        return f"moto server (pid {process.pid}) exited with code {code}: the local queues, tables and objects are gone"

    def start(self) -> None:
        if self._process is not None:
            return
        if self._port:
            _check_port_free(self._host, self._port)
        # A script run with -P: its directory does not join sys.path, and the asya_local package is not imported
        # (a third of a second the child would spend before moto's own import).
        process = subprocess.Popen(
            [sys.executable, "-P", str(_CHILD_SCRIPT), self._host, str(self._port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._process = process
        try:
            self._bound = _read_bound_address(process, self._startup_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Shut the server down; its state (queues, tables, objects) goes with its process."""
        process = self._process
        if process is None:
            return
        self._process = None
        self._bound = None
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(OSError):
            process.stdin.close()  # end of file: the child stops serving and exits
        try:
            process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

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


def _read_bound_address(process: subprocess.Popen[bytes], timeout: float) -> tuple[str, int]:
    """The ``{"host", "port"}`` line the child writes once bound, or a ``LocalModeError`` if it dies or stalls."""
    assert process.stdout is not None
    stdout = process.stdout
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), name="asya-moto-ready", daemon=True).start()
    try:
        line = lines.get(timeout=timeout)
    except queue.Empty:
        raise LocalModeError(f"moto server did not start within {timeout:g} s") from None
    if not line:
        code = process.wait()
        raise LocalModeError(f"moto server exited with code {code} before it was ready (its errors are above)")
    bound = json.loads(line)
    return str(bound["host"]), int(bound["port"])


def _check_port_free(host: str, port: int) -> None:
    # The child would exit on a taken port too, but only its stderr would say why.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise LocalModeError(f"cannot start moto on {host}:{port}: {exc.strerror}") from None
