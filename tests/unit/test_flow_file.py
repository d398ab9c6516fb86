"""Compiled flows shipped as a file (issue 29, P-FLOW-14; ``asya.flowfile``): ``ASYA_FLOWS_FILE`` and
``ASYA_FLOW_NAMES`` read as ``ASYA_FLOWS`` is, chosen by ``actor_environment`` only for programs over the inline
limit (P-FLOW-1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asya.config import ActorConfig, ConfigError
from asya.flowfile import FLOWS_FILE_NAME, INLINE_LIMIT, FlowsFileError, read_flows_file
from asya.manifest import load_manifest, parse_manifest
from asya_deploy.environment import actor_environment, flows_file_text
from tests.bigflow import big_flow_source

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _big_manifest(tmp_path: Path) -> object:
    (tmp_path / "flows").mkdir(exist_ok=True)
    (tmp_path / "flows" / "big.py").write_text(big_flow_source())
    data = {
        "namespace": "demo",
        "actors": {"a": {"handler": "m.a"}, "b": {"handler": "m.b"}, "c": {"handler": "m.c"}},
        "flows": {"big": {"source": "flows/big.py"}, "small": {"route": ["c"]}},
    }
    return parse_manifest(data, base_dir=tmp_path)


def test_a_large_program_travels_as_a_file_that_reads_back_the_same(tmp_path: Path) -> None:
    manifest = _big_manifest(tmp_path)
    actors = {a.name: a for a in manifest.deployed_actors()}
    program = manifest.flows["big"].program
    assert program is not None and len(json.dumps(program.to_json())) > 4096
    inline = actor_environment(manifest, actors["a"], table="t", bucket="b")
    assert len(inline["ASYA_FLOWS"]) > INLINE_LIMIT  # without a file the programs stay inline (the limit check says)
    text = flows_file_text(manifest)
    assert text is not None and json.loads(text) == {"big": program.to_json()}
    path = tmp_path / FLOWS_FILE_NAME
    path.write_text(text)
    env = actor_environment(manifest, actors["a"], table="t", bucket="b", flows_file=str(path))
    assert "ASYA_FLOWS" not in env
    assert (env["ASYA_FLOWS_FILE"], env["ASYA_FLOW_NAMES"]) == (str(path), "big")
    assert sum(len(k) + len(v) for k, v in env.items()) < 1024
    assert ActorConfig.from_env(env).flows == ActorConfig.from_env(inline).flows == {"big": program}
    # an actor running no flow gets neither
    assert not {"ASYA_FLOWS", "ASYA_FLOWS_FILE"} & set(
        actor_environment(manifest, actors["c"], table="t", bucket="b", flows_file=str(path))
    )


def test_small_programs_stay_inline_and_need_no_file() -> None:
    """The example mesh's triage flow (about 1.7 KB) keeps ASYA_FLOWS: no file is shipped."""
    manifest = load_manifest(REPO / "asya.yaml")
    assert flows_file_text(manifest) is None
    analyze = next(a for a in manifest.deployed_actors() if a.name == "analyze")
    env = actor_environment(manifest, analyze, table="t", bucket="b", flows_file="unused.json")
    assert "triage" in json.loads(env["ASYA_FLOWS"]) and "ASYA_FLOWS_FILE" not in env


def test_a_relative_file_is_found_on_the_import_path_like_a_module(tmp_path: Path) -> None:
    """In Lambda the flows layer puts the file at /opt/python, on the path; the artifact mesh lays layers out so."""
    manifest = _big_manifest(tmp_path)
    layer = tmp_path / "layer" / "python"
    layer.mkdir(parents=True)
    (layer / FLOWS_FILE_NAME).write_text(flows_file_text(manifest) or "")
    found = read_flows_file(FLOWS_FILE_NAME, ["big"], search=[str(tmp_path / "nothing"), str(layer)])
    assert found == {"big": manifest.flows["big"].program}
    with pytest.raises(FlowsFileError, match="is not in any directory of the import path"):
        read_flows_file(FLOWS_FILE_NAME, ["big"], search=[str(tmp_path)])
    with pytest.raises(FlowsFileError, match="holds no flow 'other'"):
        read_flows_file(str(layer / FLOWS_FILE_NAME), ["big", "other"])


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"ASYA_FLOWS": "{}", "ASYA_FLOW_NAMES": "big"}, "ASYA_FLOWS and ASYA_FLOWS_FILE are exclusive"),
        ({}, "no flow names: set ASYA_FLOW_NAMES"),
        ({"ASYA_FLOW_NAMES": "big", "BROKEN": "1"}, "is not JSON"),
    ],
)
def test_bad_flows_file_settings_are_config_errors_naming_the_variable(
    tmp_path: Path, extra: dict[str, str], needle: str
) -> None:
    path = tmp_path / FLOWS_FILE_NAME
    path.write_text("{not json" if "BROKEN" in extra else "{}")
    env = {"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "a", "ASYA_FLOWS_FILE": str(path), **extra}
    env.pop("BROKEN", None)
    with pytest.raises(ConfigError, match=needle) as info:
        ActorConfig.from_env(env)
    assert "ASYA_FLOWS" in str(info.value)
