"""The guide's (docs/guide.md) ways of reading checkpoints, run offline over JSON Lines objects x-sink and x-sump
really wrote to moto's S3 (PROTOCOL P-CKPT-1..4, GATEWAY GW-DATA-7, issue 15 item 7).

- the CLI recipe: ``sed -n '<line>p'`` on the object at the task view's ``checkpoint_key`` prints the task's envelope;
- the Athena DDL parses as Athena (and Hive) SQL, and its partition projection matches the keys the crew writes;
- the Athena query runs on DuckDB with the table replaced by ``read_json_auto`` over the objects, its ``SELECT``,
  ``WHERE``, ``GROUP BY`` and ``ORDER BY`` taken verbatim from the guide.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot

from asya import tableschema
from asya.config import ActorConfig
from asya_crew.sump import SumpRuntime
from tests.functional.actors import actor_env, deliver, queue_arn
from tests.functional.test_sink import Sink, envelope, failed_envelope

pytestmark = pytest.mark.functional

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
TABLE = "asya_checkpoints"
NOW = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)


def _readme_sql() -> tuple[str, str]:
    """The guide's Athena DDL and query (its ``sql`` blocks of the Checkpoints section)."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("\n## Checkpoints\n") :]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    blocks = re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)
    [ddl] = [b for b in blocks if b.startswith("CREATE EXTERNAL TABLE")]
    [query] = [b for b in blocks if b.startswith("SELECT")]
    return ddl, query


def _failed(env_id: str, *, actor: str, reason: str, kind: str, updated_at: str) -> dict[str, Any]:
    """A failed envelope as an actor sends it to x-sink (or the layer to x-sump) with this error type."""
    env = failed_envelope(env_id)
    env["status"].update(
        actor=actor, reason=reason, updated_at=updated_at, error={"message": "it broke", "type": kind, "mro": []}
    )
    return env


@pytest.fixture
def written(mesh: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Three crew invocations over two days; every object copied from moto's S3 to ``tmp_path/bucket/{key}``.
    Yields ``{"dir", "sink", "keys", "envelopes"}``."""
    sink = Sink(mesh)
    text_with_breaks = {"text": "one\ntwo\u2028three\u2029four\x85five"}
    ok = [envelope(f"ok-{n}", payload=text_with_breaks if n == 0 else None) for n in range(3)]
    boom = [
        _failed(f"boom-{n}", actor="analyze", reason="PolicyExhausted", kind="myapp.Boom", updated_at=day)
        for n, day in enumerate(["2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", "2026-03-02T09:00:00Z"])
    ]
    timeout = _failed(
        "slow-1", actor="stall", reason="HandlerTimeout", kind="HandlerTimeout", updated_at="2026-03-01T12:00:00Z"
    )
    for env in [*ok, *boom, timeout]:
        sink.store.create_task(task_id=env["id"], actor="normalize")
    assert sink.run(*ok, *boom) == []
    assert sink.run(boom[0]) == [], "a redelivery: a second line for boom-0, in another object"
    config = ActorConfig.from_env(actor_env(mesh, "x-sump"))
    sump = SumpRuntime(config, sqs=mesh.aws.sqs, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3, clock=lambda: NOW)
    forwarded = [json.dumps(body) for body in sink.drain("x-sump")]
    event = deliver(
        mesh.aws.sqs, mesh.resources.queue_urls["x-sump"], [*forwarded, timeout], arn=queue_arn(mesh, "x-sump")
    )
    assert sump.handle(event, None) == {"batchItemFailures": []}
    root = tmp_path / "bucket"
    keys = sink.keys()
    for key in keys:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(mesh.aws.s3.get_object(Bucket=sink.bucket, Key=key)["Body"].read())
    yield {"dir": root, "sink": sink, "keys": keys, "envelopes": {e["id"]: e for e in [*ok, *boom, timeout]}}


@pytest.mark.skipif(shutil.which("sed") is None, reason="needs sed")
def test_p_ckpt_4_sed_prints_the_line_the_task_view_names(written: dict[str, Any]) -> None:
    """The guide's ``aws s3 cp ... - | sed -n '<line>p'``, on the object as stored: a payload holding U+2028, U+2029
    and U+0085 is still one line, for sed as for JSON Lines readers."""
    sink: Sink = written["sink"]
    for task_id in ("ok-0", "ok-2", "boom-1", "boom-2", "slow-1"):
        view = sink.store.get_task(task_id)
        assert view is not None
        obj = written["dir"] / view["checkpoint_key"]
        line = subprocess.run(
            ["sed", "-n", f"{view['checkpoint_line']}p", str(obj)], capture_output=True, check=True, text=True
        ).stdout
        assert json.loads(line) == written["envelopes"][task_id], task_id


def test_the_readme_athena_ddl_parses_and_projects_the_keys_the_crew_writes(written: dict[str, Any]) -> None:
    ddl, _ = _readme_sql()
    for dialect in ("athena", "hive"):
        sqlglot.parse_one(ddl, read=dialect, error_level=sqlglot.ErrorLevel.RAISE)
    create = sqlglot.parse_one(ddl, read="athena")
    assert create.this.this.name == TABLE
    columns = {c.name: c for c in create.this.expressions}
    partitions = [c.name for c in create.find(sqlglot.exp.PartitionedByProperty).this.expressions]
    assert partitions == ["phase", "shard", "dt"]
    serde = create.find(sqlglot.exp.RowFormatSerdeProperty)
    assert serde.this.name == "org.apache.hive.hcatalog.data.JsonSerDe", "the deterministic JSON SerDe"
    props = {p.name: p.text("value") for p in create.find_all(sqlglot.exp.Property) if type(p) is sqlglot.exp.Property}
    assert props["projection.enabled"] == "true"
    assert set(props["projection.phase.values"].split(",")) == {"succeeded", "failed"}
    assert props["projection.shard.values"].split(",") == list(tableschema.KEY_SHARDS)
    assert (props["projection.dt.type"], props["projection.dt.format"]) == ("date", "yyyy-MM-dd")
    # the location template, read as a pattern, matches every key the crew wrote, and the partition values it binds
    # are the phase and date of the lines in that object
    location = create.find(sqlglot.exp.LocationProperty).this.name
    template = props["storage.location.template"]
    assert template.startswith(location)
    pattern = (
        re.escape(template[len(location) :])
        .replace(r"\$\{phase\}", "(?P<phase>[^/]+)")
        .replace(r"\$\{shard\}", "(?P<shard>[^/]+)")
        .replace(r"\$\{dt\}", "(?P<dt>[^/]+)")
    )
    for key in written["keys"]:
        match = re.match(pattern + r"[^/]+\.jsonl$", key)
        assert match, key
        assert match["shard"] in tableschema.KEY_SHARDS, key
        for line in (written["dir"] / key).read_text(encoding="utf-8").splitlines():
            env = json.loads(line)
            assert env["status"]["phase"] == match["phase"] and env["status"]["updated_at"][:10] == match["dt"]
            assert set(columns) - {"parent_id"} <= set(env), "every declared column is a member of the envelope"


def test_the_readme_athena_query_runs_on_duckdb_over_the_crew_s_objects(written: dict[str, Any]) -> None:
    """The same SELECT/WHERE/GROUP BY/ORDER BY; only ``FROM asya_checkpoints`` becomes ``read_json_auto`` over the
    copied objects, with ``phase`` and ``dt`` taken from the key as partition projection does. boom-0's redelivered
    line is counted once; x-sink's forwards to x-sump were not checkpointed again; x-sump's own line is there."""
    _, query = _readme_sql()
    source = (
        "(SELECT *, split_part(filename, '/', -4) AS phase, split_part(filename, '/', -2) AS dt "
        f"FROM read_json_auto('{written['dir']}/*/*/*/*.jsonl', filename = true, union_by_name = true, "
        f"format = 'newline_delimited')) AS {TABLE}"
    )
    assert query.count(f"FROM {TABLE}\n") == 1
    rows = duckdb.connect().sql(query.replace(f"FROM {TABLE}\n", f"FROM {source}\n")).fetchall()
    assert rows == [
        ("2026-03-01", "analyze", "PolicyExhausted", "myapp.Boom", 2),
        ("2026-03-01", "stall", "HandlerTimeout", "HandlerTimeout", 1),
        ("2026-03-02", "analyze", "PolicyExhausted", "myapp.Boom", 1),
    ]
