"""One ``cdk.out`` per manifest and content, synthesized once and shared: by the infra tier's ``example_synth`` on
both xdist workers, by the artifact suite's mesh, and by the next run while nothing it depends on has changed.

:func:`cached_cdk_out` keys the assembly by the content of what synthesis reads (the manifest, ``cdk.json``,
``pyproject.toml``, the ``cdk``, ``layers``, ``crew``, ``gateway``, ``functions`` and ``flows`` trees), the Python
version and the installed ``aws-cdk-lib``, and keeps it under ``.asya/cdk-out/<manifest>-<key>/cdk.out``. A file lock
makes the first caller synthesize while the others wait and then read the same directory; the caller says how (the
infra tier in-process with ``asya_cdk.testing.synthesize_mesh``, the artifact suite with :func:`synthesize`,
``cdk/app.py`` in a child process, which keeps jsii's Node process out of its session: the same app, context and
output). A project outside the repository (a test's own manifest, flows and code) names its assembly and the
directories it reads. An assembly counts once its synthesis has finished (a ``complete`` marker next to it); one that
did not finish is removed by the next caller, as are older assemblies of the same manifest.

Readers must not write into it: the artifact mesh runs functions with ``-B`` (no bytecode next to the code, as on
Lambda's read-only ``/var/task``), and ``tests/infra/test_example_stack.py`` checks that the assets hold no
``__pycache__``.

:func:`load_synthesized` reads an assembly back as :class:`~asya_cdk.testing.SynthesizedMesh`; its ``built`` app is
constructed (not synthesized again) the first time a test asks for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from asya_cdk.testing import SynthesizedMesh

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".asya" / "cdk-out"
#: What synthesis reads besides the manifest (paths relative to the repository).
_INPUT_TREES = ("cdk", "deploy", "layers", "crew", "gateway", "functions", "flows")
_INPUT_FILES = ("cdk.json", "pyproject.toml")
_SKIPPED_PARTS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache"})
_CALLER_ENVIRONMENT = frozenset({"CDK_DEFAULT_REGION", "CDK_DEFAULT_ACCOUNT"})


def content_key(manifest: Path, *, inputs: Sequence[Path] = ()) -> str:
    """The hash of everything the synthesis of ``manifest`` depends on; ``inputs``: directories of the project outside
    the repository's trees (its code and flow files), hashed by their content relative to each directory."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    def add_tree(root: Path, label: str) -> None:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not _SKIPPED_PARTS.intersection(path.parts) and path.suffix != ".pyc":
                add(f"{label}/{path.relative_to(root).as_posix()}", path.read_bytes())

    add("manifest", manifest.read_bytes())
    add("python", sys.version.encode())
    add("aws-cdk-lib", metadata.version("aws-cdk-lib").encode())
    for name in _INPUT_FILES:
        add(name, (REPO / name).read_bytes())
    for tree in _INPUT_TREES:
        add_tree(REPO / tree, tree)
    for index, root in enumerate(inputs):
        add_tree(root, f"input{index}")
    return digest.hexdigest()[:20]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def synthesize(outdir: Path, *, manifest: Path | None = None) -> Path:
    """``cdk/app.py`` into ``outdir`` (a child process: jsii's Node process stays out of the test session)."""
    command = [sys.executable, str(REPO / "cdk" / "app.py")]
    if manifest is not None:
        command += ["-c", f"manifest={manifest}"]
    # environment-agnostic, as asya_cdk.testing synthesizes: a region or account of the caller's shell stays out
    env = {key: value for key, value in os.environ.items() if key not in _CALLER_ENVIRONMENT}
    result = subprocess.run(
        command, cwd=REPO, env={**env, "CDK_OUTDIR": str(outdir)}, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"synth failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return outdir


#: Seconds each synthesis this process made took, by manifest name (the artifact suite reports them).
SYNTH_SECONDS: dict[str, float] = {}
_DONE = "complete"


def cached_cdk_out(
    manifest: Path, build: Callable[[Path], T], *, name: str | None = None, inputs: Sequence[Path] = ()
) -> tuple[Path, T | None]:
    """The ``cdk.out`` of ``manifest``; ``build(outdir)`` synthesizes it there, only when no assembly of this content
    exists (see module), and what it returned comes back with the path (``None`` when the cache had it). ``name``
    (default: the manifest's path in the repository) keeps one assembly apart from another project's, whose
    synthesis would otherwise replace it as an older one of the same manifest; ``inputs`` as for
    :func:`content_key`."""
    manifest = manifest.resolve()
    place = manifest.relative_to(REPO) if REPO in manifest.parents else Path(manifest.name)
    stem = name or "-".join(place.with_suffix("").parts)
    key = content_key(manifest, inputs=inputs)
    entry = CACHE / f"{stem}-{key}"
    outdir = entry / "cdk.out"
    with _locked(CACHE / f"{stem}.lock"):
        if (entry / _DONE).is_file():
            return outdir, None
        # none of this content, or a synthesis that did not finish: start from nothing
        for stale in CACHE.glob(f"{stem}-{'?' * len(key)}"):
            shutil.rmtree(stale, ignore_errors=True)
        started = time.monotonic()
        built = build(outdir)
        SYNTH_SECONDS[stem] = time.monotonic() - started
        (entry / _DONE).touch()
    return outdir, built


class _BuiltOnFirstUse:
    """Stands in for ``SynthesizedMesh.built``: constructs the app (no synthesis) the first time it is read, except
    for ``stack.artifact_id``, which the assembly names (constructing the example app costs a worker ~15 s, and most
    readers only want the template's file name)."""

    def __init__(self, manifest: Path, outdir: Path, *, artifact_id: str) -> None:
        self._manifest = manifest
        self._outdir = outdir
        self._built: Any = None
        self.stack = _StackOnFirstUse(self, artifact_id)

    def app(self) -> Any:
        if self._built is None:
            from asya_cdk.testing import build_mesh_app

            self._built = build_mesh_app(self._manifest, repo_root=REPO, outdir=self._outdir)
        return self._built

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app(), name)


class _StackOnFirstUse:
    """``built.stack`` of :class:`_BuiltOnFirstUse`: ``artifact_id`` from the assembly, the rest from the app."""

    def __init__(self, built: _BuiltOnFirstUse, artifact_id: str) -> None:
        self._built = built
        self.artifact_id = artifact_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._built.app().stack, name)


def load_synthesized(cdk_out: Path, *, manifest: Path, scratch: Path) -> SynthesizedMesh:
    """The assembly at ``cdk_out`` as the infra tests read a synthesis; ``scratch`` is where ``built`` may construct
    its app."""
    from aws_cdk import cx_api
    from aws_cdk.assertions import Template

    from asya_cdk.limits import check_assembly
    from asya_cdk.testing import SynthesizedMesh

    assembly = cx_api.CloudAssembly(str(cdk_out))
    (stack,) = assembly.stacks
    template: dict[str, Any] = stack.template
    return SynthesizedMesh(
        built=_BuiltOnFirstUse(manifest, scratch, artifact_id=stack.id),  # type: ignore[arg-type]
        outdir=cdk_out,
        template=Template.from_json(template),
        resources=template["Resources"],
        outputs=template.get("Outputs", {}),
        limits=check_assembly(assembly),
    )
