"""``asya flow gc``: collect the flow programs no task can need any more (P-FLOWV-4, docs/deploy.md "Upgrading a
mesh").

Programs live at ``flows/{digest}.json`` and never expire on their own (a pause has no deadline). A collection:

1. keeps every program of the current manifest and every program a paused task names (the flow state of each
   ``paused/{id}.json``);
2. marks every other program retired, with the object tag ``asya-retired-at`` = now, unless it has the tag already;
   a kept program loses the tag (a paused task that was resumed meanwhile made it needed again);
3. deletes a program whose ``asya-retired-at`` is older than ``grace``: every task that could have been running on it
   when it was first found unused has reached its deadline since (``grace`` is at least the longest flow timeout).

A running task's envelope names no index, so "running on it" is bounded by time, never listed: a program is deleted
only after two collections at least ``grace`` apart found it unused. ``dry_run`` reads only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.manifest import Manifest
from asya.programstore import state_digest
from asya.tableschema import PAUSED_PREFIX, PROGRAMS_PREFIX
from asya.timeutil import format_ts, parse_ts
from asya_local.exceptions import LocalModeError

__all__ = ["RETIRED_TAG", "Collection", "collect", "default_grace"]

#: The object tag that marks a program found unused, with the time it was first found so.
RETIRED_TAG: Final = "asya-retired-at"
_PROGRAM: Final = re.compile(rf"{re.escape(PROGRAMS_PREFIX)}([0-9a-f]{{64}})\.json")
_MIN_GRACE: Final = timedelta(days=1)


@dataclass
class Collection:
    """What a collection did (or would do, dry): digests kept, newly retired, deleted, and still waiting."""

    kept: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        return {"kept": self.kept, "retired": self.retired, "deleted": self.deleted, "waiting": self.waiting}


def default_grace(manifest: Manifest) -> timedelta:
    """The longest flow timeout of ``manifest``, at least one day."""
    timeouts = [timedelta(seconds=f.timeout) for f in manifest.flows.values() if f.timeout is not None]
    return max([_MIN_GRACE, *timeouts])


def _keys(s3: Any, bucket: str, prefix: str) -> Iterator[str]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            yield str(entry["Key"])


def _paused_digests(s3: Any, bucket: str) -> set[str]:
    found: set[str] = set()
    for key in _keys(s3, bucket, PAUSED_PREFIX):
        try:
            document = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                continue  # resumed or canceled since the listing
            raise
        headers = document.get("headers") if isinstance(document, dict) else None
        named = state_digest(headers) if isinstance(headers, dict) else None
        if named is not None:
            found.add(named[1])
    return found


def _retired_at(s3: Any, bucket: str, key: str) -> tuple[datetime | None, list[dict[str, str]]]:
    tags = list(s3.get_object_tagging(Bucket=bucket, Key=key).get("TagSet", []))
    mark = next((t["Value"] for t in tags if t["Key"] == RETIRED_TAG), None)
    return (parse_ts(mark) if mark else None), [t for t in tags if t["Key"] != RETIRED_TAG]


def _unmark(s3: Any, bucket: str, key: str, others: list[dict[str, str]]) -> None:
    if others:
        s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": others})
    else:
        s3.delete_object_tagging(Bucket=bucket, Key=key)


def collect(
    manifest: Manifest,
    *,
    s3: Any,
    bucket: str,
    grace: timedelta,
    now: Callable[[], datetime],
    dry_run: bool = False,
) -> Collection:
    """One collection of ``bucket``'s programs (see the module docstring); raises :class:`LocalModeError`."""
    if grace < default_grace(manifest):
        raise LocalModeError(f"--grace must be at least {default_grace(manifest)} (the longest flow timeout, >= 1 day)")
    try:
        return _collect(manifest, s3=s3, bucket=bucket, grace=grace, moment=now(), dry_run=dry_run)
    except (ClientError, BotoCoreError) as exc:
        raise LocalModeError(f"flow gc of bucket {bucket}: {exc}") from None


def _collect(
    manifest: Manifest, *, s3: Any, bucket: str, grace: timedelta, moment: datetime, dry_run: bool
) -> Collection:
    keep = {spec.program.digest for spec in manifest.flows.values() if spec.program is not None}
    keep |= _paused_digests(s3, bucket)
    done = Collection()
    for key in _keys(s3, bucket, PROGRAMS_PREFIX):
        matched = _PROGRAM.fullmatch(key)
        if matched is None:
            continue
        digest = matched.group(1)
        retired, others = _retired_at(s3, bucket, key)
        if digest in keep:
            done.kept.append(digest)
            if retired is not None and not dry_run:
                _unmark(s3, bucket, key, others)
        elif retired is None:
            done.retired.append(digest)
            if not dry_run:
                mark = {"Key": RETIRED_TAG, "Value": format_ts(moment)}
                s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": [*others, mark]})
        elif moment - retired >= grace:
            done.deleted.append(digest)
            if not dry_run:
                s3.delete_object(Bucket=bucket, Key=key)
        else:
            done.waiting.append(digest)
    return done
