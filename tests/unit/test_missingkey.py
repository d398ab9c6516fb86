"""``asya.missingkey``: a 403 on a read is "missing" only when a listing of the key itself finds nothing (issue 24: S3
answers 404 only to a caller with an unconditioned ``s3:ListBucket``, which no mesh role has)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from asya.missingkey import is_missing

pytestmark = pytest.mark.unit

KEY = "paused/t1.json"


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "GetObject")


class _Lister:
    def __init__(self, keys: list[str] | None = None, fail: bool = False) -> None:
        self.keys = keys or []
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    def list_objects_v2(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.fail:
            raise _error("AccessDenied")
        return {"Contents": [{"Key": key} for key in self.keys]} if self.keys else {"KeyCount": 0}


@pytest.mark.parametrize("code", ["NoSuchKey", "404", "NotFound"])
def test_a_404_is_missing_without_a_listing(code: str) -> None:
    lister = _Lister()
    assert is_missing(lister, "b", KEY, _error(code))
    assert lister.calls == []


@pytest.mark.parametrize("code", ["AccessDenied", "403"])
def test_a_403_with_no_such_key_listed_is_missing(code: str) -> None:
    lister = _Lister(keys=["paused/t1.json.bak"])
    assert is_missing(lister, "b", KEY, _error(code))
    assert lister.calls == [{"Bucket": "b", "Prefix": KEY, "MaxKeys": 1}]


def test_a_403_on_a_listed_key_is_a_real_denial() -> None:
    assert not is_missing(_Lister(keys=[KEY]), "b", KEY, _error("AccessDenied"))


def test_a_403_whose_listing_fails_is_not_called_missing() -> None:
    assert not is_missing(_Lister(fail=True), "b", KEY, _error("AccessDenied"))


def test_other_errors_are_not_missing() -> None:
    lister = _Lister()
    assert not is_missing(lister, "b", KEY, _error("SlowDown"))
    assert lister.calls == []
