"""What importing the ABI and converting plain values loads, seen from a fresh interpreter (the layer's cold start,
PROTOCOL 3.5). A child process is the only place where nothing is imported yet, so this lives in the functional tier
rather than next to ``tests/unit/test_serialize.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]


def test_to_jsonable_does_not_import_pydantic_for_plain_values() -> None:
    """Cold start: pydantic is only touched through a model instance's own methods."""
    code = (
        "import sys, dataclasses, datetime\n"
        "from asya.abi import load_handler, to_jsonable\n"
        "@dataclasses.dataclass\n"
        "class D:\n"
        "    at: datetime.date\n"
        "print(to_jsonable({'d': D(datetime.date(2026, 1, 1)), 's': {1}, 'b': b'x'}))\n"
        "print('pydantic' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "layers" / "sidecar" / "python")},
        timeout=120,
    )
    assert result.stdout.splitlines() == ["{'d': {'at': '2026-01-01'}, 's': [1], 'b': 'eA=='}", "False"]
