"""The artifact suite against a real deployment (``make e2e-aws``): deploy, target, clean up.

The suite in ``tests/e2e/artifact`` runs against a *target*: the artifact mesh (the default) or, with
``ASYA_E2E_TARGET=aws``, a throwaway deployment of the example mesh. Only the target changes; the tests are the same.

- :func:`aws_unavailable_reason` says why the real-AWS run cannot run, from the environment and the shared config
  files only (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_SHARED_CREDENTIALS_FILE``,
  ``AWS_CONFIG_FILE``, web identity and container credentials; a region from ``AWS_REGION``,
  ``AWS_DEFAULT_REGION`` or the profile). It never calls AWS: the suite then skips, naming the reason.
- :class:`AwsDeployment` stages a project of the example mesh under a unique namespace (``e2e`` + 6 hex digits),
  runs ``asya deploy`` with ``asya:deleteData=true`` (the table and bucket go with the stack), reads the stack's
  outputs and serves :class:`AwsTarget`. ``stop()`` (also registered with ``atexit``, so an interrupted session still
  cleans up) runs ``asya destroy --delete-data --yes`` and then :func:`delete_leftovers`.
- :func:`delete_leftovers` deletes what a namespace may leave whatever happened before: the stack if it still
  exists, the task table (deletion protection off first), the buckets named ``asya-{ns}-*`` (every object version and
  delete marker, then the bucket) and the log groups named after the stack.
  ``python -m tests.e2e.artifact.aws_target cleanup NAMESPACE``, from the repository root, runs it by hand
  (docs/deploy.md, "The real-AWS run").
- :class:`AwsTarget` offers what the suite reads of the artifact mesh: ``url`` (a local signing client that signs
  each plain request with SigV4 for ``execute-api`` with the session's credentials and relays it, streaming, to API
  Gateway), ``api_url`` (API Gateway itself), ``clients`` (boto3 clients of the session, for inspection),
  ``resources`` (table and bucket from the outputs), ``esms`` (the event source mappings' configuration read from
  Lambda) and ``denied()`` (always empty: AWS itself refuses, and the tests see the refusal).
"""

from __future__ import annotations

import atexit
import configparser
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from asya import naming
from asya.awsclients import LOCAL_BUDGET, aws_client
from asya_local.artifact.apifront import RequestSigner
from asya_local.exceptions import LocalModeError
from asya_local.moto_server import AwsClients
from asya_local.provision import MeshResources

__all__ = [
    "ENV_TARGET",
    "AwsDeployment",
    "AwsTarget",
    "aws_unavailable_reason",
    "delete_leftovers",
    "main",
    "stage_project",
    "throwaway_namespace",
]

#: The environment variable that selects the suite's target: ``artifact`` (default) or ``aws``.
ENV_TARGET: Final = "ASYA_E2E_TARGET"
#: Where the outputs of ``asya deploy`` are written in the staged project.
_OUTPUTS: Final = "cdk-outputs.json"
_STAGE: Final = "prod"
#: The profile settings that make a profile usable without a key pair in the credentials file.
_PROFILE_SOURCES: Final = (
    "aws_access_key_id",
    "role_arn",
    "credential_process",
    "sso_session",
    "sso_start_url",
    "web_identity_token_file",
)


class AwsRunError(LocalModeError):
    """A step of the real-AWS run failed (deploy, destroy or cleanup); the message names the step."""


# -- may it run? ---------------------------------------------------------------------------------------------------


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    if path.is_file():
        try:
            parser.read(path, encoding="utf-8")
        except configparser.Error:
            return configparser.ConfigParser(interpolation=None)
    return parser


def aws_unavailable_reason(env: Mapping[str, str], *, home: Path) -> str | None:
    """``None`` when credentials and a region are configured, else why not. Reads only ``env`` and the shared
    config files (never the network), so it cannot tell expired or wrong credentials from good ones: AWS will."""
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    credentials = _read_ini(Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"))
    config = _read_ini(Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config"))
    section = "default" if profile == "default" else f"profile {profile}"
    profile_config = dict(config[section]) if config.has_section(section) else {}
    found = (
        bool(env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"))
        or bool(env.get("AWS_WEB_IDENTITY_TOKEN_FILE") and env.get("AWS_ROLE_ARN"))
        or bool(env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"))
        or (credentials.has_section(profile) and bool(credentials[profile].get("aws_access_key_id")))
        or any(profile_config.get(key) for key in _PROFILE_SOURCES)
    )
    if not found:
        return (
            f"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile "
            f"with credentials (profile {profile!r} has none in the shared credentials or config file)"
        )
    if not (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or profile_config.get("region")):
        return f"no AWS region: set AWS_REGION (or a region in profile {profile!r})"
    return None


def target_name(env: Mapping[str, str]) -> str:
    """The suite's target from :data:`ENV_TARGET`; raises :class:`LocalModeError` naming a bad value."""
    value = env.get(ENV_TARGET, "artifact") or "artifact"
    if value not in ("artifact", "aws"):
        raise LocalModeError(f"{ENV_TARGET} must be 'artifact' or 'aws', got {value!r}")
    return value


# -- the throwaway project ----------------------------------------------------------------------------------------


def throwaway_namespace() -> str:
    return naming.validate_namespace(f"e2e{secrets.token_hex(3)}")


def stage_project(directory: Path, *, namespace: str, repo: Path) -> Path:
    """A project (``asya init``'s ``app.py`` and ``cdk.json``) holding the repository's example mesh under
    ``namespace``: its ``asya.yaml`` with the namespace replaced, its ``functions/`` and ``flows/``."""
    from asya_local.scaffold import scaffold

    scaffold(directory, namespace=namespace)
    manifest = (repo / "asya.yaml").read_text(encoding="utf-8")
    lines = manifest.splitlines(keepends=True)
    replaced = [f"namespace: {namespace}\n" if line.startswith("namespace:") else line for line in lines]
    if replaced == lines:
        raise AwsRunError(f"{repo / 'asya.yaml'}: no top-level 'namespace:' line to replace")
    (directory / "asya.yaml").write_text("".join(replaced), encoding="utf-8")
    for folder in ("functions", "flows"):
        shutil.rmtree(directory / folder, ignore_errors=True)
        if (repo / folder).is_dir():
            shutil.copytree(repo / folder, directory / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(directory / "tests", ignore_errors=True)
    return directory


# -- cleanup ------------------------------------------------------------------------------------------------------


def _code(exc: Any) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def delete_leftovers(session: Any, namespace: str, *, log: Callable[[str], None] = print) -> list[str]:
    """Delete whatever the namespace left in the session's region; answers what was deleted. Idempotent."""
    from botocore.exceptions import ClientError

    deleted: list[str] = []
    stack = f"asya-{namespace}"
    cloudformation = aws_client("cloudformation", LOCAL_BUDGET, session=session)
    try:
        status = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError as exc:
        if _code(exc) != "ValidationError":  # "Stack ... does not exist"
            raise
        status = None
    if status is not None and status != "DELETE_COMPLETE":
        log(f"deleting stack {stack} ({status})")
        cloudformation.delete_stack(StackName=stack)
        cloudformation.get_waiter("stack_delete_complete").wait(StackName=stack)
        deleted.append(f"stack {stack}")
    dynamodb = aws_client("dynamodb", LOCAL_BUDGET, session=session)
    table = naming.table_name(namespace)
    try:
        dynamodb.update_table(TableName=table, DeletionProtectionEnabled=False)
        dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 2, "MaxAttempts": 60})
        dynamodb.delete_table(TableName=table)
        deleted.append(f"table {table}")
    except ClientError as exc:
        if _code(exc) != "ResourceNotFoundException":
            raise
    s3 = aws_client("s3", LOCAL_BUDGET, session=session)
    for bucket in (b["Name"] for b in s3.list_buckets().get("Buckets", [])):
        if bucket.startswith(f"asya-{namespace}-"):
            _delete_bucket(s3, bucket)
            deleted.append(f"bucket {bucket}")
    logs = aws_client("logs", LOCAL_BUDGET, session=session)
    for prefix in (f"asya-{namespace}-", f"/aws/lambda/asya-{namespace}-", f"/aws/apigateway/asya-{namespace}-"):
        for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
            for group in page.get("logGroups", []):
                logs.delete_log_group(logGroupName=group["logGroupName"])
                deleted.append(f"log group {group['logGroupName']}")
    for item in deleted:
        log(f"deleted {item}")
    return deleted


def _delete_bucket(s3: Any, bucket: str) -> None:
    """Every object version and delete marker (the bucket may be versioned), then the bucket."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        doomed = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        ]
        for start in range(0, len(doomed), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed[start : start + 1000], "Quiet": True})
    s3.delete_bucket(Bucket=bucket)


# -- the target ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _MappingConfig:
    batch_size: int
    batching_window_seconds: int


@dataclass(frozen=True)
class _MappingView:
    """What the suite reads of an event source mapping (``.config``); no delivery counts in AWS (``stats``)."""

    config: _MappingConfig
    stats: None = None


def botocore_signer(session: Any, region: str) -> RequestSigner:
    """A :data:`asya_local.artifact.apifront.RequestSigner` with the session's credentials (SigV4, ``execute-api``,
    the session token included), refreshed as botocore refreshes them."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    def sign(
        *, method: str, host: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Mapping[str, str]:
        url = f"https://{host}{path}" + (f"?{query}" if query else "")
        # only what no hop rewrites is signed: the host, the date, the token and the body's type
        kept = {k: v for k, v in headers.items() if k.lower() == "content-type"}
        request = AWSRequest(method=method, url=url, data=body, headers={**kept, "host": host})
        SigV4Auth(session.get_credentials().get_frozen_credentials(), "execute-api", region).add_auth(request)
        wanted = ("authorization", "x-amz-date", "x-amz-security-token", "host")
        return {k.lower(): v for k, v in request.headers.items() if k.lower() in wanted}

    return sign


class AwsTarget:
    """A deployed mesh seen as the suite sees the artifact mesh (the attributes the tests read)."""

    kind: Final = "aws"

    def __init__(self, session: Any, *, region: str, namespace: str, outputs: Mapping[str, str]) -> None:
        from asya_local.artifact.apifront import SigningClient
        from asya_local.serving import UvicornThread  # uvicorn: only when a target starts

        self.namespace = namespace
        self._session = session
        gateway = outputs.get("GatewayUrl", "")
        parts = urlsplit(gateway)
        # http only on loopback: the suite points this target at the artifact mesh's API front to exercise it
        loopback = parts.scheme == "http" and parts.hostname == "127.0.0.1"
        if not (parts.scheme == "https" or loopback) or not parts.netloc:
            raise AwsRunError(f"the stack's GatewayUrl output is not an https URL: {gateway!r}")
        stage = parts.path.strip("/") or _STAGE
        origin = f"{parts.scheme}://{parts.netloc}"
        self.api_url = f"{origin}/{stage}"
        self._signer = UvicornThread(
            SigningClient(origin, region=region, signer=botocore_signer(session, region)), name="asya-e2e-aws-signer"
        )
        self._signer.start()
        self.url = f"{self._signer.url}/{stage}"
        self.clients = AwsClients(
            sqs=aws_client("sqs", LOCAL_BUDGET, session=session),
            dynamodb=aws_client("dynamodb", LOCAL_BUDGET, session=session),
            s3=aws_client("s3", LOCAL_BUDGET, session=session),
            endpoint_url=None,
            region=region,
        )
        self.resources = MeshResources(
            namespace=namespace, table=outputs.get("TableName", ""), bucket=outputs.get("BucketName", "")
        )
        self._esms: dict[str, _MappingView] | None = None

    @property
    def esms(self) -> dict[str, _MappingView]:
        """The event source mappings' configuration by actor (the function's ``ASYA_ACTOR``; the backstop's timer
        queue under ``asya.naming.DEADLINE``), read from Lambda once."""
        if self._esms is None:
            client = aws_client("lambda", LOCAL_BUDGET, session=self._session)
            found: dict[str, _MappingView] = {}
            prefix = f"asya-{self.namespace}-"
            for page in client.get_paginator("list_functions").paginate():
                for function in page.get("Functions", []):
                    if not function["FunctionName"].startswith(prefix):
                        continue
                    variables = function.get("Environment", {}).get("Variables", {})
                    actor = variables.get("ASYA_ACTOR") or naming.DEADLINE
                    for mapping in client.list_event_source_mappings(FunctionName=function["FunctionArn"]).get(
                        "EventSourceMappings", []
                    ):
                        config = _MappingConfig(
                            int(mapping.get("BatchSize", 10)), int(mapping.get("MaximumBatchingWindowInSeconds", 0))
                        )
                        found[actor] = _MappingView(config)
            self._esms = found
        return self._esms

    def denied(self) -> list[str]:
        return []

    def clear_denied(self) -> None:
        return None

    def stop(self) -> None:
        self._signer.stop()


class AwsDeployment:
    """Deploy the example mesh under a throwaway namespace; :attr:`target` while it runs; ``stop()`` removes it all."""

    def __init__(
        self,
        repo: Path,
        workdir: Path,
        *,
        region: str,
        namespace: str | None = None,
        session: Any = None,
        run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
        log: Callable[[str], None] = print,
    ) -> None:
        self.repo = repo
        self.namespace = namespace or throwaway_namespace()
        self.project = workdir / self.namespace
        self.region = region
        self._session = session
        self._run = run
        self._log = log
        self.target: AwsTarget | None = None
        self._stopped = False

    @property
    def session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.Session(region_name=self.region)
        return self._session

    def _asya(self, *argv: str) -> None:
        command = [sys.executable, "-m", "asya_local", *argv]
        env = {**os.environ, "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
        self._log(f"e2e-aws: {' '.join(argv)}")
        result = self._run(command, cwd=self.project, env=env, check=False, text=True)
        if result.returncode != 0:
            raise AwsRunError(f"asya {argv[0]} failed (exit {result.returncode}) for namespace {self.namespace}")

    def start(self) -> AwsTarget:
        # registered before anything is created: an interrupted session still cleans up at exit
        atexit.register(self.stop)
        self._log(
            f"e2e-aws: namespace {self.namespace} in {self.region}; if this run is interrupted, clean up with "
            f"`python -m tests.e2e.artifact.aws_target cleanup {self.namespace} --region {self.region}`"
        )
        stage_project(self.project, namespace=self.namespace, repo=self.repo)
        context = ["-c", f"asya:region={self.region}", "-c", "asya:deleteData=true"]
        self._asya(
            "deploy",
            "--dir",
            str(self.project),
            *context,
            "--",
            "--require-approval",
            "never",
            "--outputs-file",
            _OUTPUTS,
        )
        outputs = json.loads((self.project / _OUTPUTS).read_text(encoding="utf-8"))
        stack = outputs.get(f"asya-{self.namespace}", {})
        self.target = AwsTarget(self.session, region=self.region, namespace=self.namespace, outputs=stack)
        return self.target

    def stop(self) -> None:
        """Destroy the stack and delete what it retains; safe to call twice (``atexit`` calls it again)."""
        if self._stopped:
            return
        self._stopped = True
        if self.target is not None:
            self.target.stop()
        try:
            if (self.project / "app.py").is_file():
                self._asya(
                    "destroy", "--dir", str(self.project), "-c", f"asya:region={self.region}", "--delete-data", "--yes"
                )
        finally:
            delete_leftovers(self.session, self.namespace, log=self._log)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.e2e.artifact.aws_target check`` (exit 0 when the run can run, else 1 printing why not) or
    ``python -m tests.e2e.artifact.aws_target cleanup NAMESPACE [--region R]`` (delete what a run left)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.e2e.artifact.aws_target")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="exit 0 if the real-AWS run can run here, else 1 saying why (no network)")
    cleanup = commands.add_parser("cleanup", help="delete what a run under NAMESPACE left")
    cleanup.add_argument("namespace")
    cleanup.add_argument("--region", default=None)
    args = parser.parse_args(argv)
    reason = aws_unavailable_reason(os.environ, home=Path.home())
    if args.command == "check":
        print(f"e2e-aws: skipped: {reason}" if reason else "e2e-aws: credentials and region found")
        return 1 if reason else 0
    if reason is not None:
        print(f"e2e-aws cleanup: {reason}", file=sys.stderr)
        return 2
    import boto3

    namespace = naming.validate_namespace(args.namespace, field="NAMESPACE")
    deleted = delete_leftovers(boto3.Session(region_name=args.region), namespace)
    print(f"e2e-aws cleanup: {len(deleted)} resources deleted for namespace {namespace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
