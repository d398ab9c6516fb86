"""A task's view reads its paused state (GW-TASK-10) while x-pause may be storing it: x-pause writes the paused status
before the file, so the view's ``GetObject`` can answer 403 (no such key, without ``s3:ListBucket``) and the listing
that tells a missing key from a denied one, a moment later, find the file. That is a file written since the read, not
a denial: the view reads it again. A read refused twice stays the error it is."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya.store.bodies import BodyCodec

pytestmark = pytest.mark.unit

KEY = "paused/t1.json"
PAYLOAD = {"text": "a good day", "sentiment": "positive"}


class _S3:
    """S3 as the gateway's role sees it: a read of a missing key is 403; ``denials`` reads are refused, and the file
    appears with the first listing (x-pause's write landing between the read and the listing)."""

    def __init__(self, *, denials: int) -> None:
        self.denials = denials
        self.stored = False
        self.reads = 0

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self.reads += 1
        if self.denials > 0 or not self.stored:
            self.denials -= 1
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")
        body = json.dumps({"id": "t1", "payload": PAYLOAD}).encode()
        return {"Body": io.BytesIO(body), "ContentLength": len(body)}

    def list_objects_v2(self, *, Bucket: str, Prefix: str, MaxKeys: int) -> dict[str, Any]:
        self.stored = True
        return {"Contents": [{"Key": KEY}], "KeyCount": 1}


def test_gw_task_10_a_file_stored_between_the_read_and_the_listing_is_read_again() -> None:
    s3 = _S3(denials=1)
    codec = BodyCodec(bucket="b", s3=lambda: s3)
    assert codec.paused_state("t1") == {"paused_state": PAYLOAD}
    assert s3.reads == 2


def test_a_read_refused_again_is_raised() -> None:
    s3 = _S3(denials=2)
    codec = BodyCodec(bucket="b", s3=lambda: s3)
    with pytest.raises(ClientError) as refused:
        codec.paused_state("t1")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert s3.reads == 2
