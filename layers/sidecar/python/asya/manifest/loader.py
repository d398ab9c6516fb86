"""Reading ``asya.yaml``: YAML with no repeated keys, then :class:`asya.manifest.Manifest` validation, every failure
turned into one :class:`asya.exceptions.ManifestError` that lists each bad field by path with its bad value.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from asya.exceptions import ManifestError
from asya.manifest.blocks import _Model
from asya.manifest.model import Manifest
from asya.manifest.problems import MemberError
from asya.suggest import did_you_mean
from asya.timeutil import parse_duration

__all__ = ["load_manifest", "parse_manifest"]

_BOUNDS: Final = frozenset({"less_than", "less_than_equal", "greater_than", "greater_than_equal"})
_DURATION_FIELDS: Final = frozenset({"timeout", "initial_delay", "max_interval", "max_duration"})


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        path = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key{_did_you_mean(str(error['loc'][-1]))}")
            continue
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, MemberError):
            member = f"{path}.{cause.member}" if path else cause.member
            lines.append(f"{member}: {cause.reason}")
            continue
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "value_error" and not path:
            lines.append(message)
            continue
        bad = error.get("input")
        # a whole object fails a check that names its bad member and value itself: no dump of the object
        whole = error["type"] == "value_error" and isinstance(bad, dict | list)
        shown = "" if error["type"] == "missing" or whole else f" (got {bad!r})"
        if error["type"] in _BOUNDS and isinstance(bad, str) and error["loc"][-1] in _DURATION_FIELDS:
            # a duration string: say what it came to
            try:
                seconds = parse_duration(bad, field=path)
            except ValueError:
                pass
            else:
                message, shown = f"{message} seconds", f" (got {bad!r} = {seconds:g} s)"
        lines.append(f"{path or 'manifest'}: {message}{shown}")
    return "invalid manifest:\n  " + "\n  ".join(lines)


def _did_you_mean(key: str) -> str:
    return did_you_mean(key, _known_keys())


def _known_keys() -> set[str]:
    """Every key a manifest block accepts, subclasses (``ActorSpec`` under ``ActorSettings``) included."""
    known: set[str] = set()
    pending: list[type[_Model]] = [_Model]
    while pending:
        model = pending.pop()
        known.update(model.model_fields)
        pending.extend(model.__subclasses__())
    return known


def parse_manifest(data: object, *, base_dir: Path | str = ".", source: str = "manifest") -> Manifest:
    """Validate a manifest mapping. Raises :class:`ManifestError` naming each bad field and value."""
    if data is None:
        raise ManifestError(f"{source}: the manifest is empty")
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a mapping, got {type(data).__name__}")
    try:
        return Manifest.model_validate({**data, "base_dir": Path(base_dir).resolve()})
    except ValidationError as exc:
        raise ManifestError(f"{source}: {_format_validation_error(exc)}") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a key repeated in one mapping: the last one would silently win, so a second
    ``normalize:`` under ``actors`` would replace the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {mark.line + 1}, column {mark.column + 1})", mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_manifest(path: Path | str) -> Manifest:
    """Read and validate ``asya.yaml``."""
    manifest_path = Path(path)
    try:
        text = manifest_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {manifest_path} (pass --manifest PATH)") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{manifest_path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {manifest_path}: {exc.strerror}") from None
    try:
        stream = io.StringIO(text)
        stream.name = str(manifest_path)  # YAML errors then name the file, not "<unicode string>"
        data = yaml.load(stream, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{manifest_path}: invalid YAML: {exc}") from None
    return parse_manifest(data, base_dir=manifest_path.parent, source=str(manifest_path))
