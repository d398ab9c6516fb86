"""The real-AWS run's own code (``tests/e2e/artifact/aws_target.py``) where it can run here: the credentials check
(environment and config files only), the staged project, the cleanup of what a namespace leaves (against moto), and
``make e2e-aws`` without credentials (skips, saying why, exit 0). The target itself is exercised against the artifact
mesh by ``tests/e2e/artifact`` (``test_the_aws_target_signs_with_botocore_and_relays_sse``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from asya.manifest import load_manifest
from asya_local.exceptions import LocalModeError
from asya_local.moto_server import FAKE_CREDENTIALS, MotoServer
from tests.e2e.artifact.aws_target import (
    ENV_TARGET,
    aws_unavailable_reason,
    delete_leftovers,
    stage_project,
    target_name,
    throwaway_namespace,
)

REPO = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"


@pytest.mark.parametrize(
    ("env", "files", "expected"),
    [
        ({}, {}, "no AWS credentials"),
        ({"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}, {}, "no AWS region"),
        ({"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "eu-west-1"}, {}, None),
        ({"AWS_ACCESS_KEY_ID": "AKID", "AWS_REGION": "eu-west-1"}, {}, "no AWS credentials"),  # no secret
        ({}, {"credentials": "[default]\naws_access_key_id = A\naws_secret_access_key = s\n"}, "no AWS region"),
        (
            {},
            {
                "credentials": "[default]\naws_access_key_id = A\naws_secret_access_key = s\n",
                "config": "[default]\nregion = eu-west-1\n",
            },
            None,
        ),
        ({"AWS_PROFILE": "dev"}, {"config": "[profile dev]\nsso_session = corp\nregion = us-east-2\n"}, None),
        ({"AWS_PROFILE": "dev"}, {"config": "[default]\nregion = us-east-2\nrole_arn = r\n"}, "profile 'dev'"),
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, {"config": "[default]\ncredential_process = /bin/creds\n"}, None),
        ({}, {"config": "not an ini file ["}, "no AWS credentials"),
    ],
)
def test_credentials_are_found_from_the_environment_and_the_config_files_only(
    tmp_path: Path, env: dict[str, str], files: dict[str, str], expected: str | None
) -> None:
    (tmp_path / ".aws").mkdir()
    for name, text in files.items():
        (tmp_path / ".aws" / name).write_text(text)
    reason = aws_unavailable_reason(env, home=tmp_path)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_the_target_is_chosen_by_the_environment() -> None:
    assert target_name({}) == "artifact"
    assert target_name({ENV_TARGET: "aws"}) == "aws"
    with pytest.raises(LocalModeError, match="ASYA_E2E_TARGET must be 'artifact' or 'aws', got 'prod'"):
        target_name({ENV_TARGET: "prod"})


def test_the_staged_project_is_the_example_mesh_under_the_throwaway_namespace(tmp_path: Path) -> None:
    namespace = throwaway_namespace()
    assert namespace.startswith("e2e") and len(namespace) == 9
    project = stage_project(tmp_path / namespace, namespace=namespace, repo=REPO)
    manifest = load_manifest(project / "asya.yaml")
    example = load_manifest(REPO / "asya.yaml")
    assert manifest.namespace == namespace
    assert set(manifest.flows) == set(example.flows) and set(manifest.actors) == set(example.actors)
    assert (project / "functions" / "text.py").read_text() == (REPO / "functions" / "text.py").read_text()
    assert (project / "app.py").is_file() and (project / "cdk.json").is_file()


class _Stacks:
    """CloudFormation's side of the cleanup: one stack left in ``ROLLBACK_COMPLETE`` (moto's CloudFormation backend
    takes longer to load than the rest of this file runs; the calls are what matters)."""

    def __init__(self) -> None:
        self.status: str | None = "ROLLBACK_COMPLETE"
        self.calls: list[str] = []

    def describe_stacks(self, *, StackName: str) -> dict[str, Any]:
        self.calls.append(f"describe {StackName}")
        if self.status is None:
            error = {"Error": {"Code": "ValidationError", "Message": f"Stack with id {StackName} does not exist"}}
            raise ClientError(error, "DescribeStacks")  # type: ignore[arg-type]
        return {"Stacks": [{"StackName": StackName, "StackStatus": self.status}]}

    def delete_stack(self, *, StackName: str) -> None:
        self.calls.append(f"delete {StackName}")
        self.status = None

    def get_waiter(self, name: str) -> Any:
        calls = self.calls

        class _Waiter:
            def wait(self, *, StackName: str) -> None:
                calls.append(f"{name} {StackName}")

        return _Waiter()


class _MotoSession:
    """A boto3 session whose clients talk to moto's server (what :func:`delete_leftovers` asks of a session)."""

    def __init__(self, endpoint_url: str) -> None:
        self._session = boto3.Session(region_name=REGION, **FAKE_CREDENTIALS)  # type: ignore[arg-type]
        self._endpoint = endpoint_url
        self.stacks = _Stacks()

    def client(self, service: str, **kwargs: Any) -> Any:
        """``kwargs``: what :func:`asya.awsclients.aws_client` passes a session (its ``config``)."""
        if service == "cloudformation":
            return self.stacks
        return self._session.client(service, endpoint_url=self._endpoint, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def moto_session() -> Iterator[_MotoSession]:
    with MotoServer() as server:
        yield _MotoSession(server.endpoint_url)


def test_delete_leftovers_removes_the_retained_table_versioned_bucket_and_log_groups(
    moto_session: _MotoSession,
) -> None:
    """What a failed stack with retained data leaves: the stack itself, the table (deletion protection on), a
    versioned bucket with object versions and a delete marker, log groups named after the stack. Another
    namespace's are untouched; a second run finds nothing."""
    namespace, other = "e2eabc123", "e2eother1"
    dynamodb: Any = moto_session.client("dynamodb")
    s3: Any = moto_session.client("s3")
    logs: Any = moto_session.client("logs")
    for ns in (namespace, other):
        dynamodb.create_table(
            TableName=f"asya-{ns}-tasks",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            DeletionProtectionEnabled=True,
        )
        bucket = f"asya-{ns}-storagebucket-x1"
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket=bucket, Key="tasks/a.json", Body=b"1")
        s3.put_object(Bucket=bucket, Key="tasks/a.json", Body=b"2")
        s3.delete_object(Bucket=bucket, Key="tasks/a.json")
        logs.create_log_group(logGroupName=f"asya-{ns}-GatewayLogs")
        logs.create_log_group(logGroupName=f"/aws/lambda/asya-{ns}-normalize")
    said: list[str] = []
    deleted = delete_leftovers(moto_session, namespace, log=said.append)
    assert sorted(deleted) == sorted(
        [
            f"stack asya-{namespace}",
            f"table asya-{namespace}-tasks",
            f"bucket asya-{namespace}-storagebucket-x1",
            f"log group asya-{namespace}-GatewayLogs",
            f"log group /aws/lambda/asya-{namespace}-normalize",
        ]
    )
    assert said == [f"deleting stack asya-{namespace} (ROLLBACK_COMPLETE)"] + [f"deleted {item}" for item in deleted]
    assert dynamodb.list_tables()["TableNames"] == [f"asya-{other}-tasks"]
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [f"asya-{other}-storagebucket-x1"]
    stack = f"asya-{namespace}"
    assert moto_session.stacks.calls == [f"describe {stack}", f"delete {stack}", f"stack_delete_complete {stack}"]
    assert delete_leftovers(moto_session, namespace, log=said.append) == []


def test_make_e2e_aws_without_credentials_skips_saying_why_and_exits_0(tmp_path: Path) -> None:
    """No AWS variables and an empty home: ``make e2e-aws`` prints the reason, runs nothing and succeeds."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        ["make", "--no-print-directory", "e2e-aws"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "e2e-aws: skipped: no AWS credentials" in result.stdout
    assert "pytest" not in result.stdout + result.stderr
