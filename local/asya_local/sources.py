"""Where the CDK app finds the runtime code it packages, however asya-serverless was installed.

The CDK app (``asya_cdk.build_app(repo_root=...)``) packages the sidecar layer, the crew and the gateway from a
source tree laid out as this repository is: ``layers/sidecar/python/asya``, ``crew/asya_crew``,
``gateway/asya_gateway``, and ``pyproject.toml`` whose ``[project].dependencies`` pin the layers' requirements.

:func:`source_root` returns such a tree:

- from a checkout (``pip install -e .``, or the repository itself): the checkout, found from the installed ``asya``
  package's location;
- from a wheel (``pip install asya-serverless``, or of a built wheel): a tree staged under ``staging`` (the user
  project's ``.asya/source/`` by default) from the installed packages, with a ``pyproject.toml`` holding the
  installed distribution's own requirements (the same pins). It is rebuilt when the installed version or its files
  change (a digest of them names it), so a deployment always packages the code that is installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Final

from asya_local.exceptions import LocalModeError

__all__ = ["DISTRIBUTION", "checkout_root", "source_root"]

DISTRIBUTION: Final = "asya-serverless"
#: package -> its directory in the source tree
_LAYOUT: Final = {
    "asya": Path("layers") / "sidecar" / "python" / "asya",
    "asya_crew": Path("crew") / "asya_crew",
    "asya_gateway": Path("gateway") / "asya_gateway",
}
_SKIP: Final = shutil.ignore_patterns("__pycache__", "*.pyc")


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModeError(f"the package {package!r} is not installed: reinstall {DISTRIBUTION}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def checkout_root() -> Path | None:
    """The repository checkout the packages are installed from, or ``None`` for a wheel install."""
    asya_dir = _package_dir("asya")
    root = asya_dir.parents[2]
    if (root / _LAYOUT["asya"]).resolve() == asya_dir and (root / "pyproject.toml").is_file():
        return root
    return None


def source_root(*, staging: Path) -> Path:
    """A source tree the CDK app can package (see the module docstring); ``staging`` is used for wheel installs."""
    root = checkout_root()
    if root is not None:
        return root
    packages = {name: _package_dir(name) for name in _LAYOUT}
    pyproject = _pyproject()
    digest = hashlib.sha256(pyproject.encode())
    for name, directory in packages.items():
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{name}/{path.relative_to(directory).as_posix()}".encode() + b"\0" + path.read_bytes())
    target = staging / digest.hexdigest()[:16]
    if (target / "pyproject.toml").is_file():
        return target
    staging.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".source-", dir=staging))
    for name, directory in packages.items():
        shutil.copytree(directory, scratch / _LAYOUT[name], ignore=_SKIP)
    (scratch / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    for stale in staging.iterdir():
        if stale.is_dir() and stale != scratch and not stale.name.startswith("."):
            shutil.rmtree(stale, ignore_errors=True)
    scratch.rename(target)
    return target


def _pyproject() -> str:
    """A ``pyproject.toml`` whose ``[project].dependencies`` are the installed distribution's own (no extras)."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise LocalModeError(f"{DISTRIBUTION} is not installed as a distribution: pip install it") from None
    pins = [requirement for requirement in requires if "extra ==" not in requirement]
    lines = "".join(f'    "{pin}",\n' for pin in pins)
    return f'[project]\nname = "{DISTRIBUTION}"\nversion = "{version}"\ndependencies = [\n{lines}]\n'
