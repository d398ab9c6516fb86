"""``AsyaMesh`` from an installed wheel (issue 24 item 3): a wheel built from this repository, installed in a fresh
venv outside it, runs the README's "Your own project" example up to ``asya synth``, and ``AsyaMesh(...)`` in a fresh
CDK app finds the packaged runtime code in site-packages (before the fix: "the sidecar layer package is missing:
expected a directory at .../site-packages/layers/sidecar").

Cost control, none of which changes the example's commands: the wheel is installed ``--no-deps`` and the fresh venv
reads its dependencies from this checkout's venv through a ``.pth`` line (the same pins the ``[cdk]`` extra installs;
a full ``pip install 'asya-serverless[cdk]'`` takes minutes on a busy box), and the project's dependency-layer cache is
seeded with this checkout's (content-addressed by each layer's lock, so the same directories a first synth would
build). Everything runs in subprocesses of the fresh venv's interpreter, with the checkout off ``sys.path``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
_SOURCES = ("pyproject.toml", "README.md", "layers", "crew", "gateway", "cdk", "deploy", "local")
_MESH_APP = """\
import aws_cdk as cdk
from asya_cdk import AsyaMesh

app = cdk.App(outdir="cdk.mesh.out")
stack = cdk.Stack(app, "ShopMesh", env=cdk.Environment(account="123456789012", region="eu-west-1"))
AsyaMesh(stack, "Default", manifest="asya.yaml")
app.synth()
"""
_TIMEOUT = 900


def _run(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fresh venv with the wheel installed, and an ``asya init`` project beside it (both outside the repo)."""
    root = tmp_path_factory.mktemp("wheel")
    assert REPO not in root.parents
    source = root / "src"
    source.mkdir()
    for name in _SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(root / "dist"),
            str(source),
        ],
        cwd=root,
        env=env,
    )
    (wheel,) = (root / "dist").glob("asya_serverless-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root, env=env)
    python = venv / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        cwd=root,
        env=env,
    )
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root, env=env
        ).stdout.strip()
    )
    (purelib / "zz_checkout_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    found = _run(
        [str(python), "-c", "import asya, asya_cdk; print(asya.__file__); print(asya_cdk.__file__)"], cwd=root, env=env
    )
    for line in found.stdout.split():
        assert Path(line).is_relative_to(purelib), line  # the wheel's packages, never the checkout's
    _run(["asya", "init", "shop"], cwd=root, env=env)
    project = root / "shop"
    staged = Path(
        _run(
            [
                str(python),
                "-c",
                "from pathlib import Path; from asya_cdk.installed import installed_root; "
                "print(installed_root(staging=Path.cwd() / '.asya' / 'source'))",
            ],
            cwd=project,
            env=env,
        ).stdout.strip()
    )
    assert staged.is_relative_to(project) and (staged / "layers" / "sidecar" / "python" / "asya").is_dir()
    for cached in (REPO / ".cdk.staging").glob("deps-*"):
        shutil.copytree(cached, staged / ".cdk.staging" / cached.name, symlinks=True, dirs_exist_ok=True)
    return {"env": env, "python": python, "project": project}


def _functions(template_path: Path) -> list[dict[str, Any]]:
    template = json.loads(template_path.read_text(encoding="utf-8"))
    return [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]


def test_asya_mesh_in_a_fresh_cdk_app_packages_the_installed_runtime(installed: dict[str, Any]) -> None:
    """``AsyaMesh(stack, "Default", manifest="asya.yaml")`` with no ``sources``: the runtime code is staged from
    site-packages (``asya_cdk.installed``), and the template has the project's actor and the crew."""
    project: Path = installed["project"]
    (project / "mesh_app.py").write_text(_MESH_APP, encoding="utf-8")
    _run([str(installed["python"]), "mesh_app.py"], cwd=project, env=installed["env"])
    functions = _functions(project / "cdk.mesh.out" / "ShopMesh.template.json")
    actors = {f["Properties"]["Environment"]["Variables"].get("ASYA_ACTOR") for f in functions}
    assert {"greet", "x-sink", "x-sump"} <= actors
    assert any(f["Properties"]["Environment"]["Variables"].get("ASYA_HANDLER") == "hello.greet" for f in functions)


@pytest.mark.skipif(shutil.which("npx") is None, reason="asya synth runs the CDK CLI, which needs Node.js")
def test_readme_own_project_example_synthesizes_from_the_wheel(installed: dict[str, Any]) -> None:
    """README "Your own project": ``asya init shop && cd shop && asya synth`` writes ``cdk.out/asya-shop``."""
    project: Path = installed["project"]
    done = _run(["asya", "synth"], cwd=project, env=installed["env"])
    assert "synthesized asya-shop" in done.stderr + done.stdout
    functions = _functions(project / "cdk.out" / "asya-shop.template.json")
    assert any(f["Properties"]["Environment"]["Variables"].get("ASYA_HANDLER") == "hello.greet" for f in functions)
