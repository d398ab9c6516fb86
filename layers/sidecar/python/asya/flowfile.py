"""Compiled flow programs shipped as a file rather than in the environment (P-FLOW-1, P-FLOW-14).

An actor's programs travel in ``ASYA_FLOWS`` (inline JSON) while they are small. Past :data:`INLINE_LIMIT` bytes
(AWS Lambda allows 4 KB of environment per function, all variables together) they travel as a file instead:

- ``ASYA_FLOWS_FILE``: the file, JSON ``{flow: program}`` of every compiled flow of the mesh (:func:`flows_document`).
  An absolute path is read as it is; a relative one is looked up in the directories of the import path, in order,
  like a module: in AWS the CDK app ships :data:`FLOWS_FILE_NAME` in a layer of its own, at ``/opt/python/``
  (on the path of every Lambda that has the layer), and the artifact mesh puts each layer's ``python`` directory on
  the path the same way; the local mesh writes the file into its state directory and names it by absolute path.
- ``ASYA_FLOW_NAMES``: the comma-separated flows of the file whose continuations this actor runs
  (``Manifest.programs_for``), so the actor holds the same programs as with ``ASYA_FLOWS``.

Setting both ``ASYA_FLOWS`` and ``ASYA_FLOWS_FILE`` is a configuration error, as are an unreadable file, a name the
file does not hold, and a file without names.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from asya.flows.ir import Program

__all__ = ["FLOWS_FILE_NAME", "INLINE_LIMIT", "FlowsFileError", "flows_document", "read_flows_file"]

#: The file's name in the flows layer (``/opt/python/asya_flows.json`` in Lambda).
FLOWS_FILE_NAME: Final = "asya_flows.json"
#: The largest inline ``ASYA_FLOWS`` value, in bytes: half of Lambda's 4 KB environment, leaving the rest to the
#: other variables (about 600 bytes) and the actor's own ``env`` map.
INLINE_LIMIT: Final = 2048


class FlowsFileError(ValueError):
    """The flows file cannot be found or read, or does not hold a named flow."""


def flows_document(programs: Mapping[str, Program]) -> str:
    """The file's text: ``{flow: program}``, sorted, compact."""
    return json.dumps({name: programs[name].to_json() for name in sorted(programs)}, separators=(",", ":"))


def _locate(value: str, search: Sequence[str]) -> Path:
    path = Path(value)
    if path.is_absolute():
        return path
    for directory in search:
        candidate = Path(directory or ".") / path
        if candidate.is_file():
            return candidate
    raise FlowsFileError(f"{value!r} is not in any directory of the import path ({', '.join(search) or 'empty'})")


def read_flows_file(value: str, names: Sequence[str], *, search: Sequence[str] | None = None) -> dict[str, Program]:
    """The programs ``names`` of the flows file ``value`` (see the module docstring)."""
    if not names:
        raise FlowsFileError("no flow names: set ASYA_FLOW_NAMES to the flows this actor runs")
    path = _locate(value, sys.path if search is None else search)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FlowsFileError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise FlowsFileError(f"{str(path)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FlowsFileError(f"{str(path)!r} is not a JSON object of compiled flows")
    missing = [name for name in names if name not in data]
    if missing:
        raise FlowsFileError(f"{str(path)!r} holds no flow {', '.join(map(repr, missing))}")
    try:
        return {name: Program.from_json(data[name]) for name in names}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise FlowsFileError(f"{str(path)!r} is not the JSON of compiled flows: {exc}") from None
