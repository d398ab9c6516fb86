"""Lock files of the dependency layers: every distribution a layer installs, transitive ones included, pinned with
its sha256 for the Lambda platform.

One file per layer and Lambda Python version, committed under ``cdk/asya_cdk/lockfiles/``::

    cdk/asya_cdk/lockfiles/{layer}-py{X.Y}.txt      # layer: actor | gateway

What a layer is resolved from: its top-level packages (:data:`LAYER_REQUIREMENTS`), as pinned in
``pyproject.toml``'s ``[project].dependencies`` (:func:`pinned_requirements`), so the layers ship exactly the
versions the tests ran. The first line records it::

    # asya layer lock: layer=gateway python=3.14 platform=manylinux2014_aarch64 requires=aws-lambda-powertools==...

and every other line is ``name==version --hash=sha256:...`` (pip's ``--require-hashes`` format). The layer's cache
key and CDK asset hash are the sha256 of the whole file, so any change to any pin, transitive or not, builds a new
layer, and an unchanged lock reuses the built one without touching the network.

:func:`check_lock` runs at synth (no network): a missing lock, or one resolved from other top-level pins than
``pyproject.toml``'s, is a :class:`~asya_cdk.errors.DeploymentError` that names the command that regenerates it::

    make lock          # all layers, all supported Python versions (network: pip resolves for the Lambda platform)

:func:`resolve_lock` is that command's work: ``pip install --dry-run --report`` for the Lambda platform.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asya_cdk.errors import DependencyBuildError, DeploymentError
from asya_cdk.settings import PYTHON_RUNTIMES

__all__ = [
    "ACTOR_REQUIREMENTS",
    "GATEWAY_REQUIREMENTS",
    "LAMBDA_PLATFORM",
    "LAYER_REQUIREMENTS",
    "LOCK_COMMAND",
    "LOCK_DIR",
    "Lock",
    "check_lock",
    "lock_path",
    "main",
    "pinned_requirements",
    "resolve_lock",
]

#: Packages of the actor layer (sidecar and crew). boto3 comes with the Lambda runtime; pydantic is not needed on the
#: actor hot path (actors get their configuration from environment variables, ``asya.config``).
ACTOR_REQUIREMENTS: Final = ("aws-lambda-powertools",)
#: Packages of the gateway layer: the ASGI app, its server, the manifest model, input-schema validation and JWT
#: verification (GW-AUTH-5).
GATEWAY_REQUIREMENTS: Final = (
    "aws-lambda-powertools",
    "pydantic",
    "pyyaml",
    "jsonschema",
    "starlette",
    "uvicorn",
    "joserfc",
)
#: Layer name (the lock file's) -> its top-level packages.
LAYER_REQUIREMENTS: Final[Mapping[str, tuple[str, ...]]] = {
    "actor": ACTOR_REQUIREMENTS,
    "gateway": GATEWAY_REQUIREMENTS,
}

LAMBDA_PLATFORM: Final = "manylinux2014_aarch64"
#: The committed locks ship inside the package, so a wheel install of asya-serverless deploys as a checkout does.
LOCK_DIR: Final = Path(__file__).resolve().parent / "lockfiles"
LOCK_COMMAND: Final = "make lock"
_HEADER: Final = "# asya layer lock: "
_NAME_RE: Final = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock file's content: the layer, the Python version, the top-level pins it was resolved from."""

    path: Path
    text: str
    layer: str
    python_version: str
    requires: tuple[str, ...]

    @property
    def digest(self) -> str:
        """sha256 of the whole file: the layer's cache key and asset hash."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def distributions(self) -> tuple[str, ...]:
        """``name==version`` of every locked distribution."""
        return tuple(line.split()[0] for line in self.text.splitlines() if line and not line.startswith("#"))


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements(names: Sequence[str], *, pyproject: Path) -> tuple[str, ...]:
    """The requirement strings of ``names`` as pinned in ``pyproject``'s ``[project].dependencies``.

    Raises :class:`DeploymentError` when a name is not listed there.
    """
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DeploymentError(f"cannot read the dependency pins from {pyproject}: {exc}") from None
    pins: dict[str, str] = {}
    for spec in data.get("project", {}).get("dependencies", []):
        match = _NAME_RE.match(spec)
        if match:
            pins[_normalize(match.group(1))] = spec.strip()
    missing = [name for name in names if _normalize(name) not in pins]
    if missing:
        raise DeploymentError(
            f"layer requirements {missing} are not pinned in {pyproject} [project].dependencies; add them there"
        )
    return tuple(pins[_normalize(name)] for name in names)


def lock_path(lock_dir: Path, layer: str, python_version: str) -> Path:
    return lock_dir / f"{layer}-py{python_version}.txt"


def _parse(path: Path) -> Lock:
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    if not first.startswith(_HEADER):
        raise DeploymentError(
            f"{path}: not an asya layer lock (no '{_HEADER.strip()}' header); regenerate it: {LOCK_COMMAND}"
        )
    fields = dict(part.split("=", 1) for part in first.removeprefix(_HEADER).split())
    return Lock(
        path=path,
        text=text,
        layer=fields.get("layer", ""),
        python_version=fields.get("python", ""),
        requires=tuple(r for r in fields.get("requires", "").split(",") if r),
    )


def check_lock(lock_dir: Path, layer: str, python_version: str, requires: Sequence[str]) -> Lock:
    """The committed lock of ``layer``; :class:`DeploymentError` when it is missing or stale."""
    path = lock_path(lock_dir, layer, python_version)
    if not path.is_file():
        raise DeploymentError(
            f"layer {layer!r}: no lock file for Python {python_version} at {path}; generate it: {LOCK_COMMAND}"
        )
    lock = _parse(path)
    if lock.requires != tuple(requires) or lock.python_version != python_version or lock.layer != layer:
        raise DeploymentError(
            f"layer {layer!r}: {path} was resolved from {list(lock.requires)}, pyproject.toml pins {list(requires)}; "
            f"regenerate it: {LOCK_COMMAND}"
        )
    return lock


def resolve_lock(layer: str, python_version: str, requires: Sequence[str], *, pip: Sequence[str]) -> str:
    """The lock text of ``requires`` for the Lambda platform, resolved by pip (network)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [
            *pip,
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            "--platform",
            LAMBDA_PLATFORM,
            "--implementation",
            "cp",
            "--python-version",
            python_version,
            "--only-binary=:all:",
            "--target",
            str(Path(scratch) / "target"),
            *requires,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise DependencyBuildError(
                f"resolving the {layer} layer failed: {' '.join(command)}\n{result.stderr[-4000:]}"
            )
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    lines = [f"{_HEADER}layer={layer} python={python_version} platform={LAMBDA_PLATFORM} requires={','.join(requires)}"]
    for item in sorted(installs, key=lambda i: str(i["metadata"]["name"]).lower()):
        digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{item['metadata']['name']}=={item['metadata']['version']} --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate every layer lock under ``cdk/asya_cdk/lockfiles/`` from ``pyproject.toml``'s pins."""
    root = Path(__file__).resolve().parents[2]
    lock_dir = LOCK_DIR
    lock_dir.mkdir(parents=True, exist_ok=True)
    layers: Mapping[str, Sequence[str]] = LAYER_REQUIREMENTS
    for layer, names in layers.items():
        requires = pinned_requirements(names, pyproject=root / "pyproject.toml")
        for version in sorted(PYTHON_RUNTIMES):
            text = resolve_lock(layer, version, requires, pip=(sys.executable, "-m", "pip"))
            path = lock_path(lock_dir, layer, version)
            path.write_text(text, encoding="utf-8")
            print(f"{path.relative_to(root)}: {len(text.splitlines()) - 1} distributions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
