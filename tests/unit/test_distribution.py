"""The distribution (issue 20, point 1): a wheel holds every runtime package, the local mode and the CDK construct,
with SPDX licence metadata, and installs the whole ``asya`` command without extras."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _project() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_and_subpackage_is_in_the_wheel() -> None:
    setuptools = _project()["tool"]["setuptools"]  # type: ignore[index]
    roots = {package: REPO / directory for package, directory in setuptools["package-dir"].items()}
    found = set()
    for package, root in roots.items():
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join((package, *relative.parts)))
    data_dirs = {f"{package}.data" for package, root in roots.items() if (root / "data").is_dir()}
    assert set(setuptools["packages"]) == found | data_dirs


def test_licence_is_an_spdx_expression_and_local_mode_needs_no_extra() -> None:
    project = _project()["project"]
    assert project["license"] == "Apache-2.0"  # type: ignore[index]
    assert any(dep.startswith("moto[server]==") for dep in project["dependencies"])  # type: ignore[index]
    assert project["scripts"] == {"asya": "asya_local.cli:main"}  # type: ignore[index]


def test_no_shipped_module_depends_on_the_test_tree() -> None:
    """Test infrastructure (the real-AWS target of ``make e2e-aws`` among it) lives under ``tests/``: nothing the wheel
    ships imports from there, or an installed ``asya`` would fail without a checkout."""
    setuptools = _project()["tool"]["setuptools"]  # type: ignore[index]
    importing = re.compile(r"^\s*(?:from|import)\s+tests\b", re.MULTILINE)
    offenders = [
        str(module.relative_to(REPO))
        for directory in setuptools["package-dir"].values()
        for module in sorted((REPO / directory).rglob("*.py"))
        if importing.search(module.read_text(encoding="utf-8"))
    ]
    assert offenders == []
