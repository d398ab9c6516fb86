"""Record a release's goldens (docs/protocol.md, "Compatibility"): ``python -m tests.compat.record DIR`` writes
``DIR/envelopes.json`` (the envelopes of :func:`tests.compat.writers.envelopes`, as sent), ``DIR/flow_states.json``
and ``DIR/tasks.json`` (each task's stored items, as DynamoDB holds them, and its view), from the code as it is.
It refuses a directory that holds goldens already: a release's goldens are never rewritten; a new release records
into a new directory beside a frozen copy of its readers."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _tasks() -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from asya.manifest import load_manifest
    from asya.store import TaskStore
    from asya_local.provision import provision
    from tests.compat.writers import REPO, task_records

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    clock = lambda: datetime(2026, 12, 7, 10, 0, 0, 250000, tzinfo=UTC)  # noqa: E731
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        sqs, dynamodb, s3 = session.client("sqs"), session.client("dynamodb"), session.client("s3")
        resources = provision(load_manifest(REPO / "asya.yaml"), sqs=sqs, dynamodb=dynamodb, s3=s3, region="us-east-1")
        store = TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=dynamodb, s3=s3, clock=clock)
        ids = task_records(store)
        items = dynamodb.scan(TableName=resources.table)["Items"]
        out: dict[str, Any] = {}
        for name, task_id in ids.items():
            mine = [item for item in items if task_id in json.dumps(item["pk"])]
            out[name] = {"id": task_id, "items": mine, "view": store.get_task(task_id, enforce_deadline=False)}
        return out


def main(directory: str) -> None:
    from tests.compat.writers import envelopes, flow_states

    target = Path(directory)
    if target.exists() and any(target.glob("*.json")):
        raise SystemExit(f"{target} holds goldens already: record a new release into a new directory")
    target.mkdir(parents=True, exist_ok=True)
    bodies = {name: json.loads(env.to_json()) for name, env in envelopes().items()}
    for name, value in (("envelopes", bodies), ("flow_states", flow_states()), ("tasks", _tasks())):
        text = json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)
        (target / f"{name}.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
