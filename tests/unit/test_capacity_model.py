"""The capacity model on the example mesh: the declared target's first limit, the refusal naming quotas, and
``make capacity`` seeing the first limit move when a vector changes."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya.capacity import (
    HEADROOM,
    VECTORS_DIR,
    QuotaError,
    backstop_reservation,
    drain_rates,
    load_quotas,
    plan,
    raised_quotas,
    refusal,
)
from asya.manifest import Manifest, parse_manifest
from bench import capacity as make_capacity

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _example(target: float, quotas: dict[str, float] | None = None) -> Manifest:
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    data["capacity"] = {"target_rate": target, "mix": {"text-pipeline": 1.0}}
    if quotas:
        data.setdefault("deployment", {})["quotas"] = quotas
    return parse_manifest(data, base_dir=REPO)


def test_target_1000_is_served_by_default_quotas() -> None:
    result = plan(_example(1000))
    assert result.first.max_rate >= 1000
    assert refusal(result) is None


def test_target_10000_is_refused_with_default_quotas_naming_what_to_raise() -> None:
    result = plan(_example(10_000))
    message = refusal(result)
    assert message is not None
    assert "deployment.quotas.lambda_concurrency:" in message
    assert "deployment.quotas.dynamodb_table_wru:" in message


def test_target_10000_with_the_named_quotas_raised_is_served() -> None:
    raised = raised_quotas(plan(_example(10_000)))
    result = plan(_example(10_000, raised))
    assert result.first.max_rate >= 10_000, result.first
    assert refusal(result) is None


def test_a_hard_limit_cannot_be_declared_raised() -> None:
    with pytest.raises(QuotaError, match="s3_put_per_prefix"):
        load_quotas({"s3_put_per_prefix": 10_000})


@pytest.mark.parametrize("history", ["off", "steps"])
@pytest.mark.parametrize("payload", ["100 B", "1 KB", "10 KB"])
def test_gw_data_9_no_s3_prefix_limits_the_mesh_before_100000_tasks_per_second(history: str, payload: str) -> None:
    """Checkpoints and run history are spread over the key shards: every S3 prefix limit of the measured vectors lies
    past 100,000 tasks/s (one day's prefix alone broke at 35,000)."""
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    data["flows"]["text-pipeline"]["history"] = history
    data["capacity"] = {"target_rate": 100_000, "mix": {"text-pipeline": 1.0}, "payload_bytes": _BYTES[payload]}
    result = plan(parse_manifest(data, base_dir=REPO))
    s3 = [limit for limit in result.limits if limit.source == "s3_put_per_prefix"]
    assert s3 and all("{shard}" in limit.name for limit in s3), [limit.name for limit in s3]
    assert min(limit.max_rate for limit in s3) >= 100_000, [(limit.name, limit.max_rate) for limit in s3]


_BYTES = {"100 B": 100, "1 KB": 1024, "10 KB": 10_240}


def _first_at_100(report: str) -> tuple[str, float]:
    row = next(line for line in report.splitlines() if line.startswith("| 100 |"))
    cells = [cell.strip() for cell in row.split("|")]
    return cells[2], float(cells[3].replace(",", ""))


def test_make_capacity_sees_the_first_limit_move_with_a_changed_vector(tmp_path: Path) -> None:
    vectors = tmp_path / "vectors"
    shutil.copytree(VECTORS_DIR, vectors)
    report = tmp_path / "REPORT.md"
    report.write_text("# Report\n\nkept\n", encoding="utf-8")
    assert make_capacity.main(["--report", str(report), "--vectors", str(vectors)]) == 0
    before = _first_at_100(report.read_text(encoding="utf-8"))
    assert before == ("API Gateway stage throttle", 125.0)  # the throttle derived for 100 tasks/s, with headroom
    # normalize now makes 2,000 table writes per task: 12 s of calls per task, which no derived setting absorbs
    path = vectors / "text-pipeline-1kb-off-unwatched.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["requests"]["normalize|dynamodb|UpdateItem|table:TASK#{id}/TASK"] = 2000.0
    path.write_text(json.dumps(document), encoding="utf-8")
    assert make_capacity.main(["--report", str(report), "--vectors", str(vectors)]) == 0
    text = report.read_text(encoding="utf-8")
    name, rate = _first_at_100(text)
    assert name == "Lambda account concurrency (unreserved pool)"
    assert rate < before[1]
    assert text.startswith("# Report\n\nkept\n") and text.count(make_capacity.BEGIN) == 1


def test_a_new_account_with_ten_concurrent_executions_breaks_near_fourteen_tasks_per_second() -> None:
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    data.setdefault("deployment", {})["account_concurrency"] = 10
    served = {}
    for rate in (10, 20):
        data["capacity"] = {"target_rate": rate, "mix": {"text-pipeline": 1.0}}
        served[rate] = plan(parse_manifest(data, base_dir=REPO))
    pool = next(limit for limit in served[10].limits if limit.source == "lambda_concurrency")
    assert 13 < pool.max_rate < 16
    assert refusal(served[10]) is None
    message = refusal(served[20])
    assert message is not None and "raise the quota lambda_concurrency from 10 to at least" in message


def test_the_capacity_section_survives_a_bench_rerender() -> None:
    section = f"{make_capacity.BEGIN}\n## Capacity\n\nrows\n{make_capacity.END}\n"
    old = "# Report\n\nold body\n\n" + section
    kept = make_capacity.capacity_section(old)
    assert kept == section
    assert make_capacity.splice("# Report\n\nnew body\n", kept) == "# Report\n\nnew body\n\n" + section
    assert make_capacity.splice(old, section.replace("rows", "new rows")).count("new rows") == 1


def test_a_declared_target_gives_the_gateway_its_retry_after_and_shards() -> None:
    from asya.envnames import ENV
    from asya_deploy.environment import capacity_environment

    assert capacity_environment(parse_manifest(yaml.safe_load((REPO / "asya.yaml").read_text()), base_dir=REPO)) == {}
    env_1000 = capacity_environment(_example(1000))
    assert {k: v for k, v in env_1000.items() if k != ENV.admission_drain_rates} == {
        ENV.retry_after: "2",
        ENV.index_shards: "8",
    }
    env_10000 = capacity_environment(_example(10_000))
    assert {k: v for k, v in env_10000.items() if k != ENV.admission_drain_rates} == {
        ENV.retry_after: "1",
        ENV.index_shards: "32",
    }


def test_p_proc_1_concurrent_records_raise_the_account_concurrency_limit() -> None:
    """An actor that overlaps its batch's records holds its execution for one handler time per round, not per
    record: the user actors' busy time per task falls, and the shared pool serves more tasks per second."""
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((REPO / "asya.yaml").read_text(encoding="utf-8")))
    data["capacity"] = {"target_rate": 1000, "mix": {"text-pipeline": 1.0}}
    off = plan(parse_manifest(data, base_dir=REPO))
    data["defaults"]["record_concurrency"] = data["defaults"]["batch_size"]
    on = plan(parse_manifest(data, base_dir=REPO))
    for actor in ("normalize", "analyze", "summarize"):
        assert on.demand.busy_seconds[actor] < off.demand.busy_seconds[actor] / 3
    assert on.demand.busy_seconds["x-sink"] == off.demand.busy_seconds["x-sink"]

    def pool(result: Any) -> float:
        return next(limit.max_rate for limit in result.limits if limit.source == "lambda_concurrency")

    assert pool(on) > 3 * pool(off)


@pytest.mark.parametrize("target", [100, 1000])
def test_gw_ovl_7_drain_rates_are_the_rates_at_which_each_actors_event_source_breaks(target: float) -> None:
    """The model's drain rate of each actor is at least the target (synth sizes every event source for it with
    headroom), and it is what the gateway reads back from its environment."""
    from asya_deploy.environment import capacity_environment
    from asya_gateway import GatewayConfig

    result = plan(_example(target))
    rates = drain_rates(result)
    assert {"normalize", "analyze", "summarize"} <= set(rates)
    for actor in ("normalize", "analyze", "summarize"):
        (limit,) = [x for x in result.limits if x.kind == "event_source" and x.subject == actor]
        assert rates[actor] == round(limit.max_rate, 1)
        assert target <= rates[actor] <= target * HEADROOM * 1.1
    config = GatewayConfig.from_env(capacity_environment(_example(target)))
    assert config.admission_drain_rates == rates


@pytest.mark.parametrize("target", [1000, 10_000])
def test_gw_back_7_the_backstops_reservation_comes_out_of_the_pool_the_actors_share(target: float) -> None:
    """The deployment reserves the backstop's executions (its timer batches for the target, plus one): the model
    takes them out of the account's unreserved pool, and shows the reservation against the timers' demand."""
    raised = raised_quotas(plan(_example(target)))
    manifest = _example(target, raised)
    result = plan(manifest)
    reserved = backstop_reservation(manifest)
    assert reserved is not None and reserved >= 3
    assert result.settings.backstop_reserved == reserved
    quotas = result.quotas
    pool = next(limit for limit in result.limits if limit.kind == "lambda_pool")
    assert pool.capacity == quotas["lambda_concurrency"] - reserved - (
        manifest.gateway.stream_reserved_concurrency or 0
    )
    row = next(limit for limit in result.limits if limit.kind == "reserved" and limit.subject == "backstop")
    assert row.capacity == reserved - 1  # the sweep keeps one execution of its own
    assert row.max_rate >= target
