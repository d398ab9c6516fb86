"""Claim-check offload (``asya.payloads``, PROTOCOL P-LARGE-1..6) against moto S3."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya.envelope import Envelope, Route, Status, parse_envelope
from asya.payloads import PayloadStore, PayloadUnavailableError, is_reference, payload_key

pytestmark = pytest.mark.functional


def _envelope(payload: Any, *, prev: list[str] | None = None) -> Envelope:
    return Envelope(
        id="task-1", route=Route(prev or ["normalize"], "analyze", ["summarize"]), payload=payload, status=Status()
    )


def _store(mesh: Any, *, threshold_kb: int = 1) -> PayloadStore:
    return PayloadStore(
        bucket=mesh.resources.bucket, threshold_kb=threshold_kb, s3=mesh.aws.s3, token=lambda: "0a1b2c3d"
    )


def test_p_large_2_a_body_over_the_threshold_carries_a_reference_to_the_stored_payload(mesh: Any) -> None:
    payload = {"text": "x" * 2000, "tokens": list(range(50))}
    body = _store(mesh).encode("summarize", _envelope(payload))
    sent = parse_envelope(body)
    key = "payloads/task-1/0001-summarize-0a1b2c3d.json"
    assert sent.payload == {"__ref__": f"s3://{mesh.resources.bucket}/{key}"}
    assert (sent.id, sent.route.curr) == ("task-1", "analyze"), "only the payload is replaced"
    stored = mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=key)
    assert json.loads(stored["Body"].read()) == payload
    assert stored["ContentType"] == "application/json"


def test_p_large_2_a_body_at_or_under_the_threshold_is_sent_inline(mesh: Any) -> None:
    small = _envelope({"text": "hello"})
    assert _store(mesh).encode("summarize", small) == small.to_json()
    listing = mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="payloads/")
    assert listing["KeyCount"] == 0


def test_p_large_2_the_threshold_counts_utf8_bytes_not_characters(mesh: Any) -> None:
    """P-GEN-5: the size of an envelope is the byte length of its UTF-8 JSON encoding, not its character count."""
    envelope = _envelope({"text": "é" * 400})  # 400 characters, 800 bytes: over 0.5 KiB only in bytes
    store = PayloadStore(bucket=mesh.resources.bucket, threshold_kb=1, s3=mesh.aws.s3)
    assert not is_reference(parse_envelope(store.encode("x", envelope)).payload)
    envelope.payload = {"text": "é" * 600}  # 1200 bytes > 1024
    assert is_reference(parse_envelope(store.encode("x", envelope)).payload)


def test_p_gen_5_a_kib_is_1024_bytes(mesh: Any) -> None:
    """P-GEN-5: with a 1 KiB threshold, a body of exactly 1024 bytes stays inline and one of 1025 bytes is offloaded."""
    store = PayloadStore(bucket=mesh.resources.bucket, threshold_kb=1, s3=mesh.aws.s3)
    overhead = len(_envelope({"text": ""}).to_json().encode("utf-8"))
    at_limit = _envelope({"text": "x" * (1024 - overhead)})
    assert len(at_limit.to_json().encode("utf-8")) == 1024
    assert not is_reference(parse_envelope(store.encode("x", at_limit)).payload)
    over = _envelope({"text": "x" * (1025 - overhead)})
    assert is_reference(parse_envelope(store.encode("x", over)).payload)


def test_p_large_5_a_reference_is_resent_as_it_is(mesh: Any) -> None:
    store = _store(mesh)
    ref = {"__ref__": f"s3://{mesh.resources.bucket}/payloads/task-1/0000-normalize-00000000.json"}
    envelope = _envelope(ref)
    envelope.headers = {"note": "y" * 3000}  # the envelope is large for another reason
    assert parse_envelope(store.encode("analyze", envelope)).payload == ref
    assert mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="payloads/")["KeyCount"] == 0


def test_without_a_bucket_nothing_is_offloaded() -> None:
    envelope = _envelope({"text": "x" * 5000})
    assert PayloadStore(bucket=None, threshold_kb=1).encode("analyze", envelope) == envelope.to_json()


def test_p_large_4_rehydrate_reads_the_stored_json_and_leaves_other_payloads_alone(mesh: Any) -> None:
    store = _store(mesh)
    payload = {"items": [{"n": i} for i in range(200)]}
    ref = parse_envelope(store.encode("summarize", _envelope(payload))).payload
    assert store.rehydrate(ref, owners=("task-1",)) == payload
    for plain in ({"text": "hi"}, {"__ref__": "http://example/x"}, {"__ref__": "s3://b/k", "other": 1}, [1], None):
        assert store.rehydrate(plain, owners=("task-1",)) == plain


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("s3://another-bucket/payloads/task-1/x.json", "outside the project bucket"),
        ("s3://{bucket}/checkpoints/x.json", "not under 'payloads/'"),
        ("s3://{bucket}/payloads/../succeeded/x.json", "not under 'payloads/'"),
        ("s3://{bucket}/payloads/task-1/missing.json", "does not exist"),
    ],
)
def test_p_large_4_references_outside_payloads_or_to_missing_objects_are_unavailable(
    mesh: Any, ref: str, reason: str
) -> None:
    with pytest.raises(PayloadUnavailableError, match=reason):
        _store(mesh).rehydrate({"__ref__": ref.format(bucket=mesh.resources.bucket)}, owners=("task-1",))


def test_p_large_4_an_object_that_is_not_json_is_unavailable(mesh: Any) -> None:
    key = payload_key("task-1", hop=0, actor="analyze", token="ffffffff")
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=key, Body=b"{not json")
    with pytest.raises(PayloadUnavailableError, match="not JSON"):
        _store(mesh).rehydrate({"__ref__": f"s3://{mesh.resources.bucket}/{key}"}, owners=("task-1",))


def test_p_large_4_other_s3_errors_propagate_so_the_record_is_retried(mesh: Any) -> None:
    mesh.aws.s3.delete_bucket(Bucket=mesh.resources.bucket)
    store = _store(mesh)
    with pytest.raises(Exception) as caught:
        store.rehydrate({"__ref__": f"s3://{mesh.resources.bucket}/payloads/task-1/x.json"}, owners=("task-1",))
    assert not isinstance(caught.value, PayloadUnavailableError)
    assert caught.value.response["Error"]["Code"] == "NoSuchBucket"  # type: ignore[attr-defined]


def test_p_large_1_threshold_range_is_checked() -> None:
    for bad in (0, 1025):
        with pytest.raises(ValueError, match=r"1\.\.1024 KiB"):
            PayloadStore(bucket="b", threshold_kb=bad)


@pytest.mark.parametrize(
    "envelope_id",
    [
        "x/5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10",
        "../checkpoints/succeeded/victim",
        "a/../../b",
        "ü" * 256,
        "id with spaces",
        "." * 3,
        "h.0123456789abcdef0123456789abcdef",
        "x" * 65,
    ],
)
def test_p_large_2_an_id_never_steers_a_payload_key(envelope_id: str) -> None:
    """Issue 18 (security): an id cannot add a level, climb, reach another id's folder or pass S3's 1,024 bytes."""
    key = payload_key(envelope_id, hop=3, actor="analyze", token="0badc0de")
    prefix, segment, name = key.split("/")
    assert (prefix, name) == ("payloads", "0003-analyze-0badc0de.json")
    assert segment.startswith("h.") and len(segment) == 34
    assert all(c in "0123456789abcdef" for c in segment[2:])
    assert len(key.encode()) < 1024


def test_p_large_2_plain_ids_keep_their_folder_and_differ_from_digests() -> None:
    uuid_id = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"
    assert payload_key(uuid_id, hop=0, actor="a", token="ffffffff") == f"payloads/{uuid_id}/0000-a-ffffffff.json"
    digest = payload_key("x/" + uuid_id, hop=0, actor="a", token="ffffffff").split("/")[1]
    assert payload_key(digest, hop=0, actor="a", token="ffffffff").split("/")[1] != digest, "a digest is never plain"
