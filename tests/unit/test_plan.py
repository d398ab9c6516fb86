"""``asya plan OLD NEW`` (asya_local.plan): the static deploy preview from two real manifests on disk."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from asya.exceptions import ManifestError
from asya_local.cli import main
from asya_local.plan import deploy_plan, load_side, render_plan

pytestmark = pytest.mark.unit

_FLOW_V1 = """
from asya.flows import flow


@flow
def review(state):
    state = analyze(state)
    state = publish(state)
    return state
"""

_MANIFEST = """
namespace: shop
defaults:
  timeout: 30s
  batch_size: 10
actors:
  analyze:
    handler: text.analyze
  publish:
    handler: text.publish
flows:
  review:
    source: flows/review.py
    timeout: 120
  quick:
    route: [analyze]
"""


def _project(root: Path, manifest: str = _MANIFEST, flow: str = _FLOW_V1) -> Path:
    (root / "flows").mkdir(parents=True)
    (root / "functions").mkdir()
    (root / "functions" / "text.py").write_text("def analyze(p):\n    return p\n\n\ndef publish(p):\n    return p\n")
    (root / "flows" / "review.py").write_text(textwrap.dedent(flow))
    (root / "asya.yaml").write_text(textwrap.dedent(manifest))
    return root / "asya.yaml"


def test_identical_manifests_plan_nothing(tmp_path: Path) -> None:
    old = load_side(_project(tmp_path / "v1"))
    new = load_side(tmp_path / "v1")  # the directory holding asya.yaml is accepted too
    plan = deploy_plan(old, new)
    assert plan.empty and not plan.removes_actors
    assert render_plan(plan) == ["no change to actors, flows or settings"]


def test_a_renamed_actor_is_a_removal_paired_with_its_addition(tmp_path: Path) -> None:
    v2 = _MANIFEST.replace("  publish:\n    handler: text.publish", "  release:\n    handler: text.publish")
    flow_v2 = _FLOW_V1.replace("publish(state)", "release(state)")
    plan = deploy_plan(load_side(_project(tmp_path / "v1")), load_side(_project(tmp_path / "v2", v2, flow_v2)))
    assert plan.removes_actors
    assert [(r.name, r.crew, r.renamed_to) for r in plan.removed] == [("publish", False, "release")]
    assert plan.added == ("release",)
    text = "\n".join(render_plan(plan))
    assert "- publish; renamed to release?" in text


def test_a_removed_actor_with_another_handler_is_not_called_a_rename(tmp_path: Path) -> None:
    v2 = _MANIFEST.replace("  publish:\n    handler: text.publish", "  archive:\n    handler: text.analyze")
    flow_v2 = _FLOW_V1.replace("publish(state)", "archive(state)")
    plan = deploy_plan(load_side(_project(tmp_path / "v1")), load_side(_project(tmp_path / "v2", v2, flow_v2)))
    assert [(r.name, r.renamed_to) for r in plan.removed] == [("publish", None)]


def test_a_changed_flow_shows_both_digests_and_a_changed_route_both_routes(tmp_path: Path) -> None:
    old = load_side(_project(tmp_path / "v1"))
    flow_v2 = _FLOW_V1.replace("    state = publish(state)", "    state = analyze(state)\n    state = publish(state)")
    v2 = _MANIFEST.replace("route: [analyze]", "route: [analyze, publish]")
    new = load_side(_project(tmp_path / "v2", v2, flow_v2))
    plan = deploy_plan(old, new)
    assert not plan.removes_actors
    by_name = {f.name: f for f in plan.flows}
    review = by_name["review"]
    assert review.kind == "changed"
    assert review.old_digest == old.flows["review"].program.digest  # type: ignore[union-attr]
    assert review.new_digest == new.flows["review"].program.digest  # type: ignore[union-attr]
    assert review.old_digest != review.new_digest
    quick = by_name["quick"]
    assert (quick.old_route, quick.new_route) == (("analyze",), ("analyze", "publish"))
    assert f"program {review.old_digest[:12]} -> program {review.new_digest[:12]}" in "\n".join(render_plan(plan))  # type: ignore[index]


def test_flows_added_and_removed(tmp_path: Path) -> None:
    v2 = _MANIFEST.replace("  quick:\n    route: [analyze]", "  slow:\n    route: [publish]")
    plan = deploy_plan(load_side(_project(tmp_path / "v1")), load_side(_project(tmp_path / "v2", v2)))
    assert [(f.name, f.kind, f.old_route, f.new_route) for f in plan.flows] == [
        ("quick", "removed", ("analyze",), None),
        ("slow", "added", None, ("publish",)),
    ]


def test_settings_that_change_how_work_runs(tmp_path: Path) -> None:
    v2 = (
        _MANIFEST.replace("batch_size: 10", "batch_size: 2\n  max_receive_count: 9")
        .replace("timeout: 120", "timeout: 600")
        .replace(
            "    handler: text.analyze",
            "    handler: text.analyze\n    env: {SECRET_MODE: xyzzy}\n"
            "    resiliency:\n      policies: {slow: {max_attempts: 7}}\n"
            "      rules: [{errors: [TimeoutError], policy: slow}]",
        )
    )
    plan = deploy_plan(load_side(_project(tmp_path / "v1")), load_side(_project(tmp_path / "v2", v2)))
    changes = {(s.scope, s.setting): (s.old, s.new) for s in plan.settings}
    assert changes[("actors.analyze", "batch_size")] == (10, 2)
    assert changes[("actors.publish", "max_receive_count")] == (5, 9)
    assert ("actors.analyze", "visibility_timeout") in changes
    assert changes[("flows.review", "timeout")] == (120, 600)
    assert changes[("actors.analyze", "resiliency")][0] is None
    assert changes[("actors.analyze", "resiliency")][1]["policies"]["slow"]["max_attempts"] == 7
    assert changes[("actors.analyze", "env")] == (None, ["SECRET_MODE"])
    text = "\n".join(render_plan(plan))
    assert "actors.analyze.env: changed: SECRET_MODE" in text
    assert "xyzzy" not in text  # names only, never values
    assert not plan.removes_actors and not plan.flows


def test_a_crew_actor_dropped_is_a_removal(tmp_path: Path) -> None:
    """x-pause and x-resume exist only while something pauses: a deploy that stops pausing removes them."""
    v1 = _MANIFEST.replace("route: [analyze]", "route: [analyze, x-pause, publish]")
    plan = deploy_plan(load_side(_project(tmp_path / "v1", v1)), load_side(_project(tmp_path / "v2")))
    assert sorted((r.name, r.crew) for r in plan.removed) == [("x-pause", True), ("x-resume", True)]
    assert "  - x-resume (crew): paused tasks can no longer be resumed" in render_plan(plan)


def test_a_route_turned_into_a_compiled_flow(tmp_path: Path) -> None:
    v2 = _MANIFEST.replace("route: [analyze]", "source: flows/review.py")
    new = load_side(_project(tmp_path / "v2", v2))
    plan = deploy_plan(load_side(_project(tmp_path / "v1")), new)
    [quick] = [f for f in plan.flows if f.name == "quick"]
    assert (quick.kind, quick.old_route, quick.old_digest, quick.new_route) == ("changed", ("analyze",), None, None)
    assert quick.new_digest == new.flows["quick"].program.digest  # type: ignore[union-attr]


def test_a_directory_without_a_manifest_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"without asya\.yaml"):
        load_side(tmp_path)


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    v1 = _project(tmp_path / "v1")
    v2_dir = tmp_path / "v2"
    _project(v2_dir, _MANIFEST.replace("  quick:\n    route: [analyze]", ""))
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", str(v1), str(v1.parent)], stdout=out, stderr=err) == 0
    assert out.getvalue() == "no change to actors, flows or settings\n"

    out = io.StringIO()
    assert main(["plan", str(v1), str(v2_dir), "--json"], stdout=out, stderr=err) == 0
    assert json.loads(out.getvalue())["flows"][0]["name"] == "quick"

    v3 = _MANIFEST.replace("  quick:\n    route: [analyze]", "").replace("publish", "release")
    _project(tmp_path / "v3", v3, _FLOW_V1.replace("publish", "release"))
    out = io.StringIO()
    assert main(["plan", str(v1), str(tmp_path / "v3")], stdout=out, stderr=err) == 1
    assert "actors removed" in out.getvalue()

    err = io.StringIO()
    assert main(["plan", str(v1), str(tmp_path / "missing")], stdout=io.StringIO(), stderr=err) == 2
    assert "manifest not found" in err.getvalue()
