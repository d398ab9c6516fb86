"""``asya dev``'s code watcher (issue 20, point 2): which files it watches, which modules it forgets on a change."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from asya_local.reload import CodeWatcher, ReloadingHandler, syntax_problems

pytestmark = pytest.mark.unit


def _touch(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_change_forgets_the_code_modules_but_never_a_venv_or_the_mesh(tmp_path: Path) -> None:
    code = tmp_path / "code"
    _touch(code / "actors.py", "x = 1\n")
    _touch(code / ".venv" / "lib" / "site-packages" / "dep.py", "y = 1\n")
    modules = {
        "wt_actors": code / "actors.py",
        "wt_dep": code / ".venv" / "lib" / "site-packages" / "dep.py",
        "asya.wt_fake": code / "asya_fake.py",
    }
    for name, path in modules.items():
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
    try:
        watcher = CodeWatcher([code])
        assert watcher.poll() is None
        _touch(code / ".venv" / "lib" / "site-packages" / "dep.py", "y = 2\n")
        assert watcher.poll() is None  # a virtual environment inside the code directory is not watched
        _touch(code / "actors.py", "x = 2\n")
        change = watcher.poll()
        assert change is not None
        assert change.files == ((code / "actors.py").resolve(),)
        assert change.modules == ("wt_actors",)
        assert watcher.generation == 1
        assert "wt_actors" not in sys.modules and "wt_dep" in sys.modules and "asya.wt_fake" in sys.modules
    finally:
        for name in modules:
            sys.modules.pop(name, None)


def test_a_removed_file_is_a_change(tmp_path: Path) -> None:
    _touch(tmp_path / "a.py", "")
    watcher = CodeWatcher([tmp_path])
    (tmp_path / "a.py").unlink()
    change = watcher.poll()
    assert change is not None and change.files == ((tmp_path / "a.py").resolve(),)


def test_the_handler_is_rebuilt_only_after_a_change(tmp_path: Path) -> None:
    _touch(tmp_path / "a.py", "")
    watcher = CodeWatcher([tmp_path])
    built: list[int] = []

    def factory() -> object:
        built.append(len(built))
        number = len(built)
        return lambda event, context: number

    handler = ReloadingHandler(factory, watcher)  # type: ignore[arg-type]
    assert handler({}, None) == 1 and handler({}, None) == 1
    _touch(tmp_path / "a.py", "changed = True\n")
    assert watcher.poll() is not None
    assert handler({}, None) == 2 and len(built) == 2


def test_syntax_problems_name_the_file_line_and_column_without_running_it(tmp_path: Path) -> None:
    """A handler saved with a syntax error is reported at the reload, not at the next call (issue 28, item 6)."""
    good = tmp_path / "good.py"
    good.write_text("raise SystemExit('compiling must not run this')\n")
    bad = tmp_path / "functions" / "bad.py"
    bad.parent.mkdir()
    bad.write_text("def f(payload):\n    return {payload\n")
    indented = tmp_path / "indented.py"
    indented.write_text("def f():\nreturn 1\n")
    gone = tmp_path / "gone.py"
    problems = syntax_problems([good, bad, indented, gone], root=tmp_path)
    assert problems[0].startswith("functions/bad.py:2:12: SyntaxError: ")
    assert problems[1].startswith("indented.py:2:1: IndentationError: expected an indented block")
    assert len(problems) == 2
