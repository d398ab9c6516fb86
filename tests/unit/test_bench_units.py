"""The billing-units calculator of ``make bench`` (``bench/units.py``): AWS's billing rules as pure arithmetic.

GW-DATA-8 states the DynamoDB rules the layer is held to; the bench bills what the meter sees with these functions.
"""

from __future__ import annotations

import pytest

from bench import units

pytestmark = pytest.mark.unit

S = lambda text: {"S": text}  # noqa: E731 - attribute-value shorthand


def test_number_size_one_byte_per_two_significant_digits_plus_one() -> None:
    assert units.number_size("0") == 2
    assert units.number_size("7") == 2
    assert units.number_size("12") == 2
    assert units.number_size("123") == 3
    assert units.number_size("-1200") == 2  # trailing zeros and sign are not significant
    assert units.number_size("1.5e10") == 2
    assert units.number_size("0.000123") == 3


def test_item_size_sums_names_and_values_per_type() -> None:
    item = {
        "pk": S("TASK#1"),  # 2 + 6
        "n": {"N": "123"},  # 1 + 3
        "ok": {"BOOL": True},  # 2 + 1
        "b": {"B": b"\x00\x01\x02"},  # 1 + 3
        "l": {"L": [S("ab"), {"N": "1"}]},  # 1 + 3 + (1 + 2) + (1 + 2)
        "m": {"M": {"k": S("v")}},  # 1 + 3 + (1 + 1 + 1)
        "ss": {"SS": ["x", "yz"]},  # 2 + 3
    }
    assert units.item_size(item) == 8 + 4 + 3 + 4 + 10 + 7 + 5
    assert units.item_size(None) == 0
    assert units.item_size({"name": S("é")}) == 4 + 2  # UTF-8 bytes, not characters


def test_attribute_value_rejects_ambiguous_and_unknown_types() -> None:
    with pytest.raises(ValueError, match="exactly one type key"):
        units.attribute_value_size({"S": "a", "N": "1"})
    with pytest.raises(ValueError, match="'X'"):
        units.attribute_value_size({"X": "a"})


def test_gw_data_8_write_units_per_started_kb_of_the_larger_item() -> None:
    assert units.write_units(0, 10) == 1  # at least one
    assert units.write_units(1024, 0) == 1
    assert units.write_units(1025, 100) == 2  # the old item is larger: it decides
    assert units.write_units(100, 3000) == 3
    assert units.write_units(500, 500, transactional=True) == 2  # transactions bill twice
    with pytest.raises(ValueError, match="old=-1"):
        units.write_units(-1, 0)


def _task(status: str, *, progress: str = "0", deadline: bool = True, note: str = "") -> dict[str, dict[str, str]]:
    item = {
        "pk": S("TASK#t"),
        "sk": S("TASK"),
        "id": S("t"),
        "status": S(status),
        "progress_percent": {"N": progress},
        "gsi1pk": S("TASKS#2026-01-01"),
        "gsi1sk": S("2026-01-01T00:00:00.000Z#t"),
        "gsi2pk": S(f"STATUS#{status}#2026-01-01"),
        "gsi2sk": S("2026-01-01T00:00:00.000Z#t"),
    }
    if deadline:
        item.update(gsi3pk=S("ACTIVE#3"), gsi3sk=S("2026-01-01T00:05:00Z"), deadline_at=S("2026-01-01T00:05:00Z"))
    if note:
        item["note"] = S(note)
    return item


ALL = units.IndexSpec("gsi1pk", "gsi1sk")
STATUS = units.IndexSpec("gsi2pk", "gsi2sk")
DEADLINES = units.IndexSpec("gsi3pk", "gsi3sk", frozenset({"id", "deadline_at"}))


def test_index_with_all_attributes_is_written_on_every_change() -> None:
    old, new = _task("running", progress="16.7"), _task("running", progress="50")
    assert units.index_write_units(old, new, [ALL]) == 1
    assert units.index_write_units(old, old, [ALL]) == 0  # nothing changed: no index write


def test_index_key_change_is_a_delete_plus_a_put() -> None:
    assert units.index_write_units(_task("pending"), _task("running"), [STATUS]) == 2


def test_index_with_a_projection_ignores_unprojected_changes() -> None:
    old, new = _task("running", progress="16.7"), _task("running", progress="50")
    assert units.index_write_units(old, new, [DEADLINES]) == 0
    assert units.index_write_units(old, _task("succeeded", deadline=False), [DEADLINES]) == 1  # leaves the index
    assert units.index_write_units(None, new, [DEADLINES]) == 1  # enters it
    assert units.index_write_units(_task("running", deadline=False), new, [DEADLINES]) == 1


def test_index_entry_size_counts_only_keys_and_projected_attributes() -> None:
    big = _task("running", note="x" * 2500)
    grown = _task("running", progress="50", note="x" * 2500)
    assert 2048 < units.item_size(grown) <= 3072
    assert units.index_write_units(big, grown, [ALL]) == 3  # the whole item is the entry
    assert units.index_write_units(None, big, [DEADLINES]) == 1  # keys + id + deadline_at only


def test_write_units_of_a_change_split_table_and_index() -> None:
    change = units.WriteUnits.of_change(_task("pending"), _task("running"), [ALL, STATUS, DEADLINES])
    assert (change.table, change.index, change.total) == (1, 1 + 2 + 0, 4)
    transactional = units.WriteUnits.of_change(None, _task("pending"), [ALL], transactional=True)
    assert (transactional.table, transactional.index) == (2, 1)
    assert repr(transactional) == "WriteUnits(table=2, index=1)"


def test_read_units_per_4kb_halved_when_eventually_consistent() -> None:
    assert units.item_read_units(0, consistent=True) == 1  # a missing item is billed too
    assert units.item_read_units(4096, consistent=True) == 1
    assert units.item_read_units(4097, consistent=True) == 2
    assert units.item_read_units(4097, consistent=False) == 1
    assert units.item_read_units(100, consistent=True, transactional=True) == 2
    assert units.query_read_units([3000, 3000], consistent=True) == 2  # summed, then rounded up once
    assert units.query_read_units([], consistent=False) == 0.5


def test_sqs_bills_each_started_64kb_chunk() -> None:
    assert units.sqs_billed_requests(0) == 1
    assert units.sqs_billed_requests(64 * 1024) == 1
    assert units.sqs_billed_requests(64 * 1024 + 1) == 2
    assert units.sqs_billed_requests(256 * 1024) == 4
    with pytest.raises(ValueError, match="-5"):
        units.sqs_billed_requests(-5)


def test_s3_request_classes() -> None:
    assert units.s3_request_class("PutObject") == "tier1"
    assert units.s3_request_class("ListObjectsV2") == "tier1"
    assert units.s3_request_class("GetObject") == "tier2"
    assert units.s3_request_class("HeadObject") == "tier2"
    assert units.s3_request_class("DeleteObject") == "free"
