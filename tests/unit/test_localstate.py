"""The ``asya dev`` state file (``.asya/dev/{manifest}.json``) that ``asya dlq --local`` reads."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from asya_local.cli import main
from asya_local.exceptions import LocalModeError
from asya_local.localstate import LocalState, local_state, read_local_state, running_dev, state_path

pytestmark = pytest.mark.unit

#: The largest ``pid_t``, above every kernel's process id limit (Linux: 2**22, macOS: 99999): no process has it, so
#: a state file naming it was written by an ``asya dev`` that is no longer running. No child is spawned to get a
#: dead pid (the unit tier starts no processes), and no other process can take this one over in the meantime.
NO_SUCH_PID = 2**31 - 1


def _state(pid: int) -> LocalState:
    return LocalState(
        namespace="demo",
        endpoint_url="http://127.0.0.1:5000",
        gateway_url="http://127.0.0.1:8080",
        region="us-east-1",
        pid=pid,
    )


def test_written_while_running_then_removed(tmp_path: Path) -> None:
    path = state_path(tmp_path / "asya.yaml")
    assert path == tmp_path.resolve() / ".asya" / "dev" / "asya.yaml.json"
    with local_state(path, _state(os.getpid())):
        assert read_local_state(path) == _state(os.getpid())
        assert running_dev(path) == _state(os.getpid())
        assert [p.name for p in path.parent.iterdir()] == ["asya.yaml.json"]  # no temporary left behind
    assert not path.exists()


def test_a_file_written_by_another_dev_is_left_in_place(tmp_path: Path) -> None:
    path = state_path(tmp_path / "asya.yaml")
    with local_state(path, _state(os.getpid())):
        path.write_text(_dump(os.getpid() + 1))  # a second `asya dev` took the file over
    assert path.exists()


def _dump(pid: int) -> str:
    state = _state(pid)
    return json.dumps({name: getattr(state, name) for name in LocalState.__slots__})


def test_missing_stale_and_invalid_files_are_clear_errors(tmp_path: Path) -> None:
    path = state_path(tmp_path / "asya.yaml")
    assert running_dev(path) is None
    missing = r"no local mesh: .*asya\.yaml\.json does not exist; start one with `asya dev`"
    with pytest.raises(LocalModeError, match=missing):
        read_local_state(path)
    dead_pid = NO_SUCH_PID
    path.parent.mkdir(parents=True)
    path.write_text(_dump(dead_pid))
    assert running_dev(path) is None  # stale: a new `asya dev` may take it over
    with pytest.raises(
        LocalModeError, match=rf"stale .*: the `asya dev` that wrote it \(pid {dead_pid}\) is not running"
    ):
        read_local_state(path)
    path.write_text('{"namespace": "demo"}')
    with pytest.raises(LocalModeError, match=r"is not a valid asya dev state file: 'endpoint_url'"):
        read_local_state(path)


def test_a_second_asya_dev_of_the_same_manifest_is_refused_before_it_starts(tmp_path: Path) -> None:
    manifest = tmp_path / "asya.yaml"
    manifest.write_text("namespace: demo\nactors: {a: {handler: m.f}}\n", encoding="utf-8")
    path = state_path(manifest)
    out, err = io.StringIO(), io.StringIO()
    with local_state(path, _state(os.getpid())):  # a running `asya dev` (this process) serves it
        code = main(["dev", "--manifest", str(manifest), "--port", "0"], env={}, stdout=out, stderr=err)
    assert (code, out.getvalue()) == (2, "")
    assert err.getvalue() == (
        f"asya: another asya dev (pid {os.getpid()}) is serving {manifest} at http://127.0.0.1:8080; stop it first\n"
    )
