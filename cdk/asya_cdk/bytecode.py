"""Cold start: ship compiled bytecode when the synthesizing interpreter matches the Lambda runtime.

Lambda's file system is read-only outside ``/tmp``, so modules a layer ships as source are compiled again by every
cold start (asya and Powertools: about +110 ms). Bytecode is only valid for the Python minor version that wrote it,
and no CPython matching the Lambda runtime can be installed here from the package registries (Debian 12 ships 3.11;
PyPI has no interpreter package that does not download a build at install time). So the runtime is the manifest's
choice (``deployment.python_version``), and when the interpreter running ``cdk synth`` has that very minor version,
:func:`compile_tree` compiles the layers with ``unchecked-hash`` invalidation (PEP 552): the runtime trusts the
``.pyc`` without a ``stat`` of the source, and the files are reproducible (no timestamps), so asset hashes stay
stable. Otherwise the layers ship source only, as before.

:func:`stage_compiled` stages a compiled copy of a source directory (the sidecar layer) under the staging directory,
content-addressed like the gateway asset (``asya_cdk.staging``, the interpreter's version in the hash), so an
unchanged source is not copied or compiled again.
"""

from __future__ import annotations

import compileall
import py_compile
import sys
from pathlib import Path

from asya_cdk.staging import build_once, content_name, copy_files, tree_files

__all__ = ["compile_tree", "interpreter_matches", "stage_compiled"]


def interpreter_matches(python_version: str) -> bool:
    """Whether this interpreter can write bytecode for Lambda's ``python{python_version}``."""
    return python_version == f"{sys.version_info.major}.{sys.version_info.minor}"


def compile_tree(root: Path) -> None:
    """Compile every module under ``root`` into ``__pycache__`` with unchecked-hash invalidation. A module that does
    not compile (a template shipped as ``.py``) stays source-only; Python reports it on import, as it would anyway."""
    compileall.compile_dir(
        str(root), quiet=2, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, workers=1
    )


def stage_compiled(source: Path, staging_dir: Path, name: str) -> Path:
    """A compiled copy of ``source`` at ``staging_dir/{name}-{hash}``; reused while ``source`` is unchanged."""
    files = tree_files(source)

    def fill(scratch: Path) -> None:
        copy_files(source, files, scratch)
        compile_tree(scratch)

    return build_once(staging_dir / content_name(name, source, files, before=sys.version.encode()), fill)
