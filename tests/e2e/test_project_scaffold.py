"""A project of the user's own (issue 20, point 1): ``asya init`` in an empty directory, then the project's own test
passes and its ``asya dev`` serves its flow, as a new user would run them there. The synthesis is in
tests/infra/test_project_synth.py."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya_local.cli import main
from asya_local.scaffold import PROJECT_FILES

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={}, stdout=out, stderr=err, cwd=cwd)
    return code, out.getvalue(), err.getvalue()


def test_init_then_the_projects_test_passes_and_its_asya_dev_serves(tmp_path: Path, run_dev: Any) -> None:
    project = tmp_path / "My Shop"
    code, out, err = _run("init", str(project))
    assert code == 0, err
    assert out.splitlines() == [str(project / name) for name in PROJECT_FILES]
    assert err == f"asya init: project ready in {project}; next: cd '{project}' && asya dev\n"
    assert "namespace: my-shop" in (project / "asya.yaml").read_text()
    cdk_json = json.loads((project / "cdk.json").read_text())
    # the runtime's Python version is the manifest's (deployment.python_version), not a CDK context value
    assert cdk_json["app"] == "python3 app.py" and "asya:pythonVersion" not in cdk_json["context"]

    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout

    with run_dev("asya.yaml", cwd=project, log=tmp_path / "dev.stderr") as dev:
        code, out, err = _run("call", "hello", "--payload", '{"name": "Ada"}', "--brief", cwd=project)
        assert code == 0, err + dev.stderr()
        assert out.splitlines()[:2] == ["status: succeeded", 'result: {"name": "Ada", "greeting": "Hello, Ada!"}']
        assert httpx.get(f"{dev.url}/health", timeout=5).json()["status"] == "ok"


def test_init_never_overwrites_a_project(tmp_path: Path) -> None:
    (tmp_path / "asya.yaml").write_text("namespace: mine\n")
    (tmp_path / "app.py").write_text("")
    code, out, err = _run("init", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == f"asya: {tmp_path} already has asya.yaml, app.py: choose an empty or new directory\n"
    assert (tmp_path / "asya.yaml").read_text() == "namespace: mine\n"


def test_init_names_a_bad_namespace(tmp_path: Path) -> None:
    code, _, err = _run("init", str(tmp_path / "p"), "--namespace", "My_Shop")
    assert code == 2
    assert err == (
        "asya: --namespace: invalid namespace 'My_Shop': use lowercase letters, digits and '-', "
        "starting with a letter\n"
    )
    assert not (tmp_path / "p").exists()


def test_synth_outside_a_project_says_how_to_make_one(tmp_path: Path) -> None:
    code, _, err = _run("synth", "--dir", str(tmp_path))
    assert code == 2
    assert err == (
        f"asya: {tmp_path.resolve()} has no app.py: run `asya init DIR` to create a project, or pass --dir PROJECT\n"
    )


def test_synth_checks_every_handler_before_running_the_cdk_cli(tmp_path: Path) -> None:
    """Issue 20 point 5: ``asya synth`` loads every handler (no instance created) and stops before CDK runs."""
    assert _run("init", str(tmp_path / "p"))[0] == 0
    manifest = tmp_path / "p" / "asya.yaml"
    manifest.write_text(manifest.read_text().replace("hello.greet", "hello.gret"))
    code, _, err = _run("synth", "--dir", str(tmp_path / "p"))
    assert code == 2
    assert err == (
        f"asya: {manifest.resolve()}: 1 problem, nothing started:\n"
        "  actors.greet.handler: handler 'hello.gret': hello has no attribute 'gret' (did you mean 'greet'?)\n"
    )
    assert not (tmp_path / "p" / "cdk.out").exists()


def test_the_shipped_cdk_context_is_the_repositorys() -> None:
    """The scaffolded cdk.json carries the same feature flags and asya defaults as this repository's cdk.json."""
    shipped = json.loads((REPO / "local" / "asya_local" / "data" / "cdk_context.json").read_text())["context"]
    ours = json.loads((REPO / "cdk.json").read_text())["context"]
    assert shipped == {key: value for key, value in ours.items() if key != "manifest"}
