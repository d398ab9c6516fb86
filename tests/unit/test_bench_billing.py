"""``make bench``'s request billing and result shaping (``bench.meter``, ``bench.traffic``, ``bench.coldstart``,
``bench.overhead``, ``bench.latency``, ``bench.fakes``): pure functions only, nothing timed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import coldstart, overhead
from bench.fakes import FakeClient, InMemoryAws, operation_name
from bench.meter import Usage, dynamodb_read_usage, dynamodb_write_usage, s3_usage, sqs_usage, thread_component
from bench.traffic import summarize_usage

pytestmark = pytest.mark.unit


def test_sqs_requests_are_billed_per_64kb_chunk_of_their_payload() -> None:
    entries = [{"Id": str(i), "MessageBody": "x" * 40_000} for i in range(3)]
    usage = sqs_usage("SendMessageBatch", {"Entries": entries}, {})
    assert (usage.requests, usage.billed_requests, usage.payload_bytes) == (1, 2, 120_000)
    attrs = {"MessageBody": "ab", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "vv"}}}
    assert sqs_usage("SendMessage", attrs, {}).payload_bytes == 2 + 1 + 6 + 2
    received = sqs_usage("ReceiveMessage", {}, {"Messages": [{"Body": "y" * 70_000}]})
    assert (received.billed_requests, received.empty_receives) == (2, 0)
    empty = sqs_usage("ReceiveMessage", {}, {})
    assert (empty.billed_requests, empty.empty_receives) == (1, 1)
    assert sqs_usage("DeleteMessageBatch", {"Entries": entries}, {}).billed_requests == 1


def test_s3_usage_by_request_class() -> None:
    assert (s3_usage("PutObject").s3_tier1, s3_usage("PutObject").billed_requests) == (1, 1)
    assert s3_usage("GetObject").s3_tier2 == 1
    assert s3_usage("DeleteObject").billed_requests == 0


def _task(status: str, progress: str) -> dict[str, Any]:
    return {
        "pk": {"S": "TASK#t"},
        "sk": {"S": "TASK"},
        "id": {"S": "t"},
        "status": {"S": status},
        "progress_percent": {"N": progress},
        "created_at": {"S": "2026-01-01T00:00:00.000Z"},
        "deadline_at": {"S": "2026-01-01T00:05:00Z"},
        "gsi1pk": {"S": "TASKS#2026-01-01"},
        "gsi1sk": {"S": "x#t"},
        "gsi2pk": {"S": f"STATUS#{status}#2026-01-01"},
        "gsi2sk": {"S": "x#t"},
        "gsi3pk": {"S": "ACTIVE#1"},
        "gsi3sk": {"S": "2026-01-01T00:05:00Z"},
    }


def test_gw_data_8_a_progress_update_bills_the_table_only() -> None:
    usage = dynamodb_write_usage([(_task("running", "16.7"), _task("running", "50"))])
    # by_created and by_status carry only flow and ttl; active_deadlines only id, deadline_at and created_at
    assert (usage.requests, usage.wru_table, usage.wru_index, usage.wru) == (1, 1, 0, 1)
    first = dynamodb_write_usage([(_task("pending", "0"), _task("running", "16.7"))])
    assert first.wru_index == 2  # by_status changes key: a delete and a put; by_created is untouched
    created = dynamodb_write_usage([(None, _task("pending", "0"))], transactional=True)
    assert (created.wru_table, created.wru_index) == (2, 3)


def test_read_usage_per_item_or_per_query() -> None:
    assert dynamodb_read_usage("BatchGetItem", [600, 0, 5000], consistent=True).rru == 1 + 1 + 2
    assert dynamodb_read_usage("GetItem", [600], consistent=False).rru == 0.5
    assert dynamodb_read_usage("Query", [3000, 3000], consistent=True).rru == 2


def test_threads_that_declare_no_component() -> None:
    assert thread_component("asya-backstop") == "backstop"
    assert thread_component("AnyIO worker thread") == "gateway"
    assert thread_component("asya-gateway") == "gateway"


def test_usage_adds_up() -> None:
    total = Usage(requests=1, wru_table=2)
    total.add(Usage(requests=2, wru_index=3, rru=0.5))
    summary = total.to_dict()
    assert (summary["requests"], summary["wru_table"], summary["wru_index"], summary["wru"]) == (3, 2, 3, 5)
    assert summary["rru"] == 0.5


def test_summarize_usage_normalises_per_hop_and_task_and_sets_time_driven_calls_apart() -> None:
    usage = {
        ("gateway", "sqs", "SendMessage"): Usage(requests=10, billed_requests=10),
        ("normalize", "sqs", "ReceiveMessage"): Usage(requests=3, billed_requests=3, empty_receives=2),
        ("normalize", "sqs", "SendMessageBatch"): Usage(requests=10, billed_requests=10),
        ("normalize", "dynamodb", "BatchGetItem"): Usage(requests=1, billed_requests=1, rru=20),
        ("normalize", "dynamodb", "UpdateItem"): Usage(requests=10, billed_requests=10, wru_table=10, wru_index=20),
        ("backstop", "dynamodb", "Query"): Usage(requests=16, billed_requests=16, rru=8),
    }
    out = summarize_usage(usage, tasks=10, hops=20, invocations={"normalize": 1})
    sqs = out["services"]["sqs"]
    assert sqs["per_hop"]["billed_requests"] == (10 + 1 + 10) / 20  # the two empty receives are left out
    assert out["services"]["dynamodb"]["per_task"]["wru"] == 3.0
    assert out["services"]["dynamodb"]["per_hop"]["rru"] == 1.0
    assert out["dynamodb_reads_per_invocation"] == {"normalize": {"BatchGetItem": 1.0}}
    assert out["function_calls_per_task"] == {"normalize": {"dynamodb": 1.1, "sqs": 1.0}}  # no poller calls
    assert out["lambda_invocations_per_task"] == 0.1
    assert "backstop" not in out["components"]
    assert out["time_driven"]["backstop/dynamodb/Query"]["requests"] == 16


def test_importtime_lines_are_parsed_and_grouped_by_package() -> None:
    stderr = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       120 |        120 |   botocore.compat\n"
        "import time:        80 |        200 | botocore\n"
        "import time:      1500 |       1500 | asya.sidecar\n"
        "something else\n"
    )
    entries = coldstart.parse_importtime(stderr)
    assert entries == [("botocore.compat", 120), ("botocore", 80), ("asya.sidecar", 1500)]
    assert coldstart.by_package(entries) == {"botocore": 200, "asya": 1500}


def test_import_code_imports_from_the_given_stack_depth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = "import sys\nframe, DEPTH = sys._getframe(), 0\nwhile frame:\n    frame, DEPTH = frame.f_back, DEPTH + 1\n"
    names = {depth: f"asya_bench_depth_probe_{depth}" for depth in (0, 5)}
    for name in names.values():
        (tmp_path / f"{name}.py").write_text(probe, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        for depth, name in names.items():
            exec(coldstart.import_code(name, depth), {})
        assert sys.modules[names[5]].DEPTH - sys.modules[names[0]].DEPTH == 5
    finally:
        for name in names.values():
            sys.modules.pop(name, None)


def test_profile_labels_group_by_module() -> None:
    assert overhead.module_label("/r/layers/sidecar/python/asya/store/updates.py") == "asya.store"
    assert overhead.module_label("/r/layers/sidecar/python/asya/serialize.py") == "asya.serialize"
    assert overhead.module_label("/v/lib/python3.11/site-packages/aws_lambda_powertools/x/y.py") == (
        "aws_lambda_powertools"
    )
    assert overhead.module_label("/usr/lib/python3.11/json/encoder.py") == "json"
    assert overhead.module_label("~") == "builtins"
    assert overhead.module_label("/r/bench/fakes.py") == "bench"


def test_benchmark_payloads_and_events() -> None:
    payload = overhead.make_payload(4096)
    assert 4096 <= len(overhead._compact(payload)) < 4096 + 100
    event = overhead.make_event(payload, count=3)
    assert len(event["Records"]) == 3
    assert len({record["messageId"] for record in event["Records"]}) == 3
    assert all(record["eventSource"] == "aws:sqs" for record in event["Records"])


def test_in_memory_aws_answers_and_counts() -> None:
    assert operation_name("send_message_batch") == "SendMessageBatch"
    aws = InMemoryAws()
    sqs, dynamodb = FakeClient("sqs", aws), FakeClient("dynamodb", aws)
    sent = sqs.send_message_batch(QueueUrl="u", Entries=[{"Id": "0", "MessageBody": "b"}])
    assert [entry["Id"] for entry in sent["Successful"]] == ["0"]
    assert sqs.get_queue_url(QueueName="asya-x-y")["QueueUrl"].endswith("/asya-x-y")
    found = dynamodb.batch_get_item(RequestItems={"t": {"Keys": [{"pk": {"S": "TASK#a"}, "sk": {"S": "TASK"}}]}})
    assert found["Responses"]["t"] == [{"id": {"S": "a"}, "status": {"S": "running"}}]
    key = {"pk": {"S": "TASK#a"}, "sk": {"S": "TASK"}}
    seqs = [dynamodb.update_item(Key=key, ReturnValues="ALL_NEW")["Attributes"]["last_seq"]["N"] for _ in range(2)]
    assert seqs == ["2", "3"]
    assert dynamodb.put_item(Item=key) == {}
    assert aws.calls[("dynamodb", "UpdateItem")] == 2
    aws.reset()
    assert not aws.calls
