"""The ``asya dev`` state file (``.asya/local.json``) that ``asya dlq --local`` reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asya_local.exceptions import LocalModeError
from asya_local.localstate import LocalState, local_state, read_local_state, state_path

pytestmark = pytest.mark.unit


def _state(pid: int) -> LocalState:
    return LocalState(
        namespace="demo",
        endpoint_url="http://127.0.0.1:5000",
        gateway_url="http://127.0.0.1:8080",
        region="us-east-1",
        pid=pid,
    )


def test_written_while_running_then_removed(tmp_path: Path) -> None:
    path = state_path(tmp_path)
    assert path == tmp_path / ".asya" / "local.json"
    with local_state(path, _state(os.getpid())):
        assert read_local_state(path) == _state(os.getpid())
        assert [p.name for p in path.parent.iterdir()] == ["local.json"]  # no temporary left behind
    assert not path.exists()


def test_a_file_written_by_another_dev_is_left_in_place(tmp_path: Path) -> None:
    path = state_path(tmp_path)
    with local_state(path, _state(os.getpid())):
        path.write_text(_dump(os.getpid() + 1))  # a second `asya dev` took the file over
    assert path.exists()


def _dump(pid: int) -> str:
    state = _state(pid)
    return json.dumps({name: getattr(state, name) for name in LocalState.__slots__})


def test_missing_stale_and_invalid_files_are_clear_errors(tmp_path: Path) -> None:
    path = state_path(tmp_path)
    with pytest.raises(LocalModeError, match=r"no local mesh: .*local\.json does not exist; start one with `asya dev`"):
        read_local_state(path)
    with subprocess.Popen([sys.executable, "-c", "pass"]) as finished:
        finished.wait()
    dead_pid = finished.pid
    path.parent.mkdir()
    path.write_text(_dump(dead_pid))
    with pytest.raises(
        LocalModeError, match=rf"stale .*: the `asya dev` that wrote it \(pid {dead_pid}\) is not running"
    ):
        read_local_state(path)
    path.write_text('{"namespace": "demo"}')
    with pytest.raises(LocalModeError, match=r"is not a valid asya dev state file: 'endpoint_url'"):
        read_local_state(path)
