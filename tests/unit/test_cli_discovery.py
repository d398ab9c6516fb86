"""Which gateway the CLI talks to (issue 20, point 4: the running ``asya dev``'s state file, then ``ASYA_URL``, then
the default), and the CDK CLI command line of ``asya synth``/``deploy``/``destroy``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asya_local.discovery import DEFAULT_URL, discover
from asya_local.exceptions import LocalModeError
from asya_local.localstate import LocalState, local_state, state_path
from asya_local.project_cli import CDK_CLI, cdk_command

pytestmark = pytest.mark.unit


def _state(url: str, pid: int) -> LocalState:
    return LocalState(namespace="n", endpoint_url="http://127.0.0.1:1", gateway_url=url, region="us-east-1", pid=pid)


@pytest.fixture
def dead_pid() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    yield process.pid


def test_no_running_mesh_falls_back_to_asya_url_then_the_default(tmp_path: Path) -> None:
    target, warning = discover(url=None, manifest=None, env={"ASYA_URL": "http://h:1"}, cwd=tmp_path)
    assert (target.url, target.source, target.local, warning) == ("http://h:1", "ASYA_URL", None, None)
    target, _ = discover(url=None, manifest=None, env={}, cwd=tmp_path)
    assert (target.url, target.source) == (DEFAULT_URL, "default")


def test_the_manifests_running_mesh_wins_over_asya_url_and_a_stale_one_is_ignored(
    tmp_path: Path, dead_pid: int
) -> None:
    with local_state(state_path(tmp_path / "asya.yaml"), _state("http://127.0.0.1:8090", os.getpid())):
        target, warning = discover(url=None, manifest=None, env={"ASYA_URL": "http://h:1"}, cwd=tmp_path)
        assert (target.url, warning) == ("http://127.0.0.1:8090", None)
        assert target.local is not None and target.local.endpoint_url == "http://127.0.0.1:1"
        explicit, _ = discover(url="http://other:2", manifest=None, env={}, cwd=tmp_path)
        assert (explicit.url, explicit.source, explicit.local) == ("http://other:2", "--url", None)
    with local_state(state_path(tmp_path / "asya.yaml"), _state("http://127.0.0.1:8091", dead_pid)):
        target, _ = discover(url=None, manifest=None, env={}, cwd=tmp_path)
        assert target.url == DEFAULT_URL


def test_two_running_meshes_are_ambiguous_unless_a_manifest_is_named(tmp_path: Path) -> None:
    pid = os.getpid()
    with (
        local_state(state_path(tmp_path / "a.yaml"), _state("http://127.0.0.1:8001", pid)),
        local_state(state_path(tmp_path / "b.yaml"), _state("http://127.0.0.1:8002", pid)),
    ):
        target, warning = discover(url=None, manifest=None, env={}, cwd=tmp_path)
        assert target.url == DEFAULT_URL
        assert warning == (
            "several asya dev meshes run here: http://127.0.0.1:8001 (a.yaml), http://127.0.0.1:8002 (b.yaml); "
            "choose one with --manifest or --url"
        )
        target, warning = discover(url=None, manifest="b.yaml", env={}, cwd=tmp_path)
        assert (target.url, warning) == ("http://127.0.0.1:8002", None)


def test_the_cdk_cli_is_the_pinned_one_with_this_python() -> None:
    command = cdk_command(
        "synth", context=["asya:region=eu-west-1"], extra=["--", "-v"], python="/x/py", which=lambda _: "/bin/npx"
    )
    assert command == [
        "/bin/npx", "--yes", CDK_CLI, "synth", "--app", "/x/py app.py", "--output", "cdk.out", "--quiet",
        "-c", "asya:region=eu-west-1", "-v",
    ]  # fmt: skip
    assert CDK_CLI == "aws-cdk@2.1148.1"


def test_bad_context_and_a_missing_node_are_named() -> None:
    with pytest.raises(LocalModeError) as caught:
        cdk_command("deploy", context=["region"], extra=[], which=lambda _: "/bin/npx")
    assert str(caught.value) == "-c expects KEY=VALUE, got 'region'"
    with pytest.raises(LocalModeError) as caught:
        cdk_command("deploy", context=[], extra=[], which=lambda _: None)
    assert str(caught.value) == ("npx was not found: the CDK CLI needs Node.js (https://nodejs.org), install it first")
