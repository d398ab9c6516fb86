"""Where the CDK app finds the runtime code it packages, however asya-serverless was installed.

The mesh packages the sidecar layer, the crew and the gateway from a source tree laid out as this repository is
(``layers/sidecar/python/asya``, ``crew/asya_crew``, ``gateway/asya_gateway``, and a ``pyproject.toml`` whose
``[project].dependencies`` pin the layers' requirements). :func:`installed_sources` returns such a tree:

- from a checkout (``pip install -e .``, or the repository itself): the checkout, found from the installed ``asya``
  package's location;
- from a wheel (``pip install 'asya-serverless[cdk]'``): a tree staged under ``staging`` from the installed packages
  in site-packages, with a ``pyproject.toml`` holding the installed distribution's own requirements (the same pins).
  A digest of the installed version and files names it, so it is rebuilt when they change and a deployment always
  packages the code that is installed; older staged trees are removed.

``asya_cdk.AsyaMesh`` uses it with ``staging`` = ``./.asya/source`` of the working directory when no ``sources`` are
given; ``asya init``'s ``app.py`` passes its project's own ``.asya/source``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Final

from asya_cdk.assets import SourceLayout
from asya_cdk.errors import DeploymentError

__all__ = ["DISTRIBUTION", "checkout_root", "installed_root", "installed_sources"]

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
        raise DeploymentError(f"the package {package!r} is not installed: reinstall {DISTRIBUTION}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def checkout_root() -> Path | None:
    """The repository checkout the packages are installed from, or ``None`` for a wheel install."""
    asya_dir = _package_dir("asya")
    root = asya_dir.parents[2]
    if (root / _LAYOUT["asya"]).resolve() == asya_dir and (root / "pyproject.toml").is_file():
        return root
    return None


def installed_root(*, staging: Path) -> Path:
    """A source tree the CDK app can package (see the module docstring); ``staging`` is used for wheel installs."""
    root = checkout_root()
    if root is not None:
        return root
    packages = {name: _package_dir(name) for name in _LAYOUT}
    pyproject = _pyproject()
    digest = hashlib.sha256(pyproject.encode())
    for name, directory in packages.items():
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
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
    try:
        scratch.rename(target)
    except OSError:  # a concurrent synth staged the same digest first: its tree is the same, by its name
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def installed_sources(*, staging: Path) -> SourceLayout:
    """:func:`installed_root` as the :class:`~asya_cdk.assets.SourceLayout` the mesh packages."""
    return SourceLayout.from_repo(installed_root(staging=staging))


def _pyproject() -> str:
    """A ``pyproject.toml`` whose ``[project].dependencies`` are the installed distribution's own (no extras)."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise DeploymentError(f"{DISTRIBUTION} is not installed as a distribution: pip install it") from None
    pins = [requirement for requirement in requires if "extra ==" not in requirement]
    lines = "".join(f'    "{pin}",\n' for pin in pins)
    return f'[project]\nname = "{DISTRIBUTION}"\nversion = "{version}"\ndependencies = [\n{lines}]\n'
