"""The manifest's compiled flows (P-FLOW-1), their environment (ASYA_FLOWS), and ``asya flow check`` / ``show``
with the DOT and Mermaid diagrams."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from asya.config import ActorConfig
from asya.manifest import load_manifest, parse_manifest
from asya_deploy.environment import actor_environment
from asya_local.cli import main

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _manifest(tmp_path: Path, flow_source: str, **flow: object) -> dict[str, object]:
    (tmp_path / "flows").mkdir(exist_ok=True)
    (tmp_path / "flows" / "f.py").write_text(flow_source)
    return {
        "namespace": "demo",
        "actors": {"a": {"handler": "m.a"}, "b": {"handler": "m.b"}},
        "flows": {"f": {"source": "flows/f.py", **flow}},
    }


def test_p_flow_1_the_manifest_compiles_a_source_flow_once(tmp_path: Path) -> None:
    data = _manifest(
        tmp_path, "def f(state):\n    state = a(state)\n    state['r'] = [b(state)]\n    state = pause(state)\n"
    )
    manifest = parse_manifest(data, base_dir=tmp_path)
    flow = manifest.flows["f"]
    assert flow.route == ["a"] and flow.program is not None
    assert "x-fanin-flow-f" in manifest.crew_actors() and "x-pause" in manifest.crew_actors()
    assert set(manifest.programs_for("b")) == {"f"} and set(manifest.programs_for("x-resume")) == {"f"}
    assert manifest.programs_for("x-sink") == {}
    deployed = {d.name: d for d in manifest.deployed_actors()}
    env = actor_environment(manifest, deployed["x-fanin-flow-f"], table="t", bucket="b")
    config = ActorConfig.from_env(env)
    assert config.flows["f"] == flow.program


def test_compile_errors_are_manifest_errors_naming_the_field(tmp_path: Path) -> None:
    data = _manifest(tmp_path, "def f(state):\n    x = 1\n    state = nope(state)\n")
    with pytest.raises(ValueError) as caught:
        parse_manifest(data, base_dir=tmp_path)
    text = str(caught.value)
    assert "flows.f.source: the flow does not compile:" in text
    assert "flows/f.py:2:5: flows have no local variables ('x')" in text
    assert "flows/f.py:3:13: 'nope' is not an actor of the manifest" in text


def test_route_and_source_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"source: 'flows/f\.py' and a route are exclusive"):
        parse_manifest(_manifest(tmp_path, "def f(state):\n    state = a(state)\n", route=["a"]), base_dir=tmp_path)
    with pytest.raises(ValueError, match="route: give a route of at least one actor, or a source"):
        parse_manifest(
            {"namespace": "demo", "actors": {"a": {"handler": "m.a"}}, "flows": {"f": {}}}, base_dir=tmp_path
        )


def _cli(*argv: str, cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env={}, stdout=out, stderr=err, cwd=cwd)
    return code, out.getvalue(), err.getvalue()


def test_asya_flow_check_reports_every_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(state):\n    import os\n    for x in state['l']:\n        pass\n")
    code, out, err = _cli("flow", "check", str(bad), "--no-manifest", cwd=tmp_path)
    assert code == 1
    assert out.splitlines() == [
        f"{bad}:2:5: `import` is not supported in a flow; fix: import at the top of the module, outside the flow "
        "function",
        f'{bad}:3:5: `for` is not supported in a flow; fix: `for` exists only as a map: state["r"] = [act(x) for x in '
        'state["items"]]; loop with `while`',
    ]
    assert "2 error(s)" in err
    code, _, err = _cli(
        "flow", "check", str(REPO / "flows" / "triage.py"), "--manifest", str(REPO / "asya.yaml"), cwd=tmp_path
    )
    assert code == 0 and err.strip().endswith(": ok")


def test_asya_flow_show_prints_the_program_and_writes_dot_and_mermaid(tmp_path: Path) -> None:
    code, out, _ = _cli(
        "flow", "show", "triage", "--manifest", str(REPO / "asya.yaml"), "--out", str(tmp_path), cwd=tmp_path
    )
    assert code == 0
    assert "initial route: ['normalize', 'analyze']" in out and "try (KeyError -> " in out
    dot = (tmp_path / "triage.dot").read_text()
    assert dot.startswith('digraph "triage" {') and 'label="except KeyError", style=dashed' in dot
    mermaid = (tmp_path / "triage.mmd").read_text()
    assert mermaid.startswith("flowchart TD\n") and '-.->|"except KeyError"|' in mermaid
    assert " end" not in mermaid  # `end` is a Mermaid keyword
    code, out, _ = _cli(
        "flow", "show", "triage", "--manifest", str(REPO / "asya.yaml"), "--out", str(tmp_path), "--json", cwd=tmp_path
    )
    assert json.loads(out)["flow"] == "triage"


def test_asya_flow_show_of_a_static_route_says_so(tmp_path: Path) -> None:
    code, _, err = _cli(
        "flow", "show", "text-pipeline", "--manifest", str(REPO / "asya.yaml"), "--out", str(tmp_path), cwd=tmp_path
    )
    assert code == 2 and "is a static route" in err


def test_the_readme_shows_the_example_flow_next_to_its_current_diagram(tmp_path: Path) -> None:
    _cli("flow", "show", "triage", "--manifest", str(REPO / "asya.yaml"), "--out", str(tmp_path), cwd=tmp_path)
    readme = (REPO / "README.md").read_text()
    assert (tmp_path / "triage.mmd").read_text().rstrip() in readme
    assert load_manifest(REPO / "asya.yaml").flows["triage"].source == "flows/triage.py"


def test_the_deployment_dump_of_a_manifest_loads_without_the_flow_file(tmp_path: Path) -> None:
    """The gateway reads the manifest as the CDK app dumped it (manifest.json, no flows/ directory beside it): the
    compiled program travels in it, P-FLOW-1."""
    from asya_cdk.assets import render_manifest_json

    manifest = load_manifest(REPO / "asya.yaml")
    dumped = json.loads(render_manifest_json(manifest))
    elsewhere = tmp_path / "asset"
    elsewhere.mkdir()
    again = parse_manifest(dumped, base_dir=elsewhere)
    assert again.flows["triage"].program == manifest.flows["triage"].program
    assert again.flows["triage"].route == ["normalize", "analyze"]


_UNKNOWN_ACTOR_FLOW = "def f(state):\n    state = nope(state)\n    return state\n"


def test_asya_flow_check_outside_a_project_does_not_pass_unchecked_actor_names(tmp_path: Path) -> None:
    """With no manifest found, the actor names cannot be checked: the check says so and fails, never prints a bare
    ``ok``; ``--no-manifest`` asks for the language check only and says what it skipped."""
    flow = tmp_path / "f.py"
    flow.write_text(_UNKNOWN_ACTOR_FLOW)
    code, out, err = _cli("flow", "check", str(flow), cwd=tmp_path)
    assert code == 1, err
    assert "ok" not in err.split()
    assert "actor names not checked: no asya.yaml" in err and "--manifest" in err and "--no-manifest" in err
    code, out, err = _cli("flow", "check", str(flow), "--no-manifest", cwd=tmp_path)
    assert code == 0 and out == ""
    assert err.strip() == f"{flow}: ok (language only; actor names not checked: --no-manifest)"


def test_asya_flow_check_finds_the_manifest_above_the_flow_file(tmp_path: Path) -> None:
    """``asya flow check flows/f.py`` from elsewhere checks against the project's asya.yaml (the nearest one above the
    file), and says which; a ``--manifest`` that does not exist is an error, not a silent skip."""
    data = _manifest(tmp_path, _UNKNOWN_ACTOR_FLOW)
    (tmp_path / "asya.yaml").write_text(json.dumps({k: v for k, v in data.items() if k != "flows"}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, err = _cli("flow", "check", str(tmp_path / "flows" / "f.py"), cwd=elsewhere)
    assert code == 1
    assert "'nope' is not an actor of the manifest" in out
    assert f"actor names checked against {tmp_path / 'asya.yaml'}" in err
    code, out, err = _cli("flow", "check", str(tmp_path / "flows" / "f.py"), "--manifest", "missing.yaml", cwd=tmp_path)
    assert code != 0 and "missing.yaml" in err
