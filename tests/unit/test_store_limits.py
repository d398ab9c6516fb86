"""Size limits of the values a status update stores on the task item (GW-DATA-8 R2, GW-DATA-6): ``message`` (128
bytes) and ``error`` (256 bytes) cut with an ellipsis, names and ``data`` (384 bytes) refused by ``StatusUpdate``, and
the fitting the layer and the crew apply to ``data`` instead of being refused."""

from __future__ import annotations

import dataclasses
import json

import pytest

from asya.store import (
    DATA_LIMIT_BYTES,
    ERROR_LIMIT_BYTES,
    MESSAGE_LIMIT_BYTES,
    NAME_LIMIT,
    StatusUpdate,
    StatusUpdateError,
    clip_text,
    fit_data,
    fit_data_json,
)

pytestmark = pytest.mark.unit


def _size(data: dict[str, object]) -> int:
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


@pytest.mark.parametrize("text", ["", "short", "x" * 1024, "€" * 341])
def test_gw_data_8_text_within_the_limit_is_kept_as_it_is(text: str) -> None:
    assert clip_text(text, 1024) is text


@pytest.mark.parametrize("limit", [MESSAGE_LIMIT_BYTES, ERROR_LIMIT_BYTES, 1024])
@pytest.mark.parametrize("text", ["x" * 1025, "€" * 342, "é" * 100_000, "a€" * 5_000])
def test_gw_data_8_clipped_text_fits_ends_with_an_ellipsis_and_is_valid_utf_8(text: str, limit: int) -> None:
    clipped = clip_text(text, limit)
    size = len(clipped.encode("utf-8"))
    assert size <= limit
    head, ellipsis = clipped[:-1], clipped[-1]
    assert ellipsis == "\u2026"
    assert text.startswith(head)
    # cut on a character boundary: at most one character (3 bytes here) less than the room left by the ellipsis
    assert len(head.encode("utf-8")) > limit - 3 - 3


def test_gw_data_8_small_data_is_unchanged_by_fitting() -> None:
    data = {"prev": ["normalize"], "curr": "analyze", "next": ["summarize"], "message_size_kb": 1.1}
    assert fit_data(data) == data


def test_gw_data_8_a_long_route_is_left_out_largest_list_first() -> None:
    data = {"prev": [f"step-{i:04d}" for i in range(600)], "curr": "loop", "next": ["a", "b"], "attempt": 2}
    fitted = fit_data(data)
    assert fitted == {"curr": "loop", "next": ["a", "b"], "attempt": 2, "omitted": ["prev"]}
    both = fit_data({**data, "next": [f"later-{i:04d}" for i in range(500)]})
    assert set(both) == {"curr", "attempt", "omitted"} and sorted(both["omitted"]) == ["next", "prev"]


def test_gw_data_8_a_long_string_member_is_clipped_and_anything_else_too_big_left_out() -> None:
    fitted = fit_data({"error": "x" * 100_000, "attempt": 2})
    assert fitted["attempt"] == 2 and len(fitted["error"].encode("utf-8")) <= ERROR_LIMIT_BYTES
    odd = fit_data({"frames": [{"blob": "y" * 800} for _ in range(10)], "attempt": 2})
    assert odd == {"attempt": 2, "omitted": ["frames"]}
    assert _size(odd) <= DATA_LIMIT_BYTES


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"actor": "a" * (NAME_LIMIT + 1)}, "actor: 257 characters, over the limit of 256"),
        ({"status": "failed", "failed_actor": "f" * 300}, "failed_actor: 300 characters, over the limit of 256"),
        ({"data": {"prev": ["p" * 100] * 50}}, "data: 5160 bytes as JSON, over the limit of 384 bytes"),
        ({"data": {"prev": ["p" * (DATA_LIMIT_BYTES - 12)]}}, "data: 385 bytes as JSON, over the limit of 384 bytes"),
    ],
)
def test_gw_data_8_status_update_refuses_values_over_the_limits_naming_the_field(
    fields: dict[str, object], message: str
) -> None:
    kwargs: dict[str, object] = {"status": "running", **fields}
    with pytest.raises(StatusUpdateError) as caught:
        StatusUpdate(**kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert caught.value.field == message.split(":", maxsplit=1)[0]


@pytest.mark.parametrize(
    ("fields", "name", "limit"),
    [
        ({"message": "m" * (MESSAGE_LIMIT_BYTES + 1)}, "message", MESSAGE_LIMIT_BYTES),
        ({"message": "€" * 43}, "message", MESSAGE_LIMIT_BYTES),
        ({"status": "failed", "error": "e" * 2000}, "error", ERROR_LIMIT_BYTES),
        ({"status": "failed", "error": "é" * (ERROR_LIMIT_BYTES // 2 + 1)}, "error", ERROR_LIMIT_BYTES),
    ],
)
def test_gw_data_8_status_update_cuts_long_message_and_error_with_an_ellipsis_instead_of_refusing(
    fields: dict[str, str], name: str, limit: int
) -> None:
    """R2: the task item stays under 1 KB; the whole error stays in ``error_details`` (the result item)."""
    kwargs: dict[str, object] = {"status": "running", **fields}
    update = StatusUpdate(**kwargs)  # type: ignore[arg-type]
    stored = getattr(update, name)
    assert stored == clip_text(fields[name], limit)
    assert stored != fields[name] and stored.endswith("\u2026")
    assert len(stored.encode("utf-8")) <= limit


def test_gw_data_8_values_exactly_at_the_limits_are_accepted_and_data_is_encoded_once() -> None:
    data = {"prev": ["p" * (DATA_LIMIT_BYTES - 13)]}
    assert _size(data) == DATA_LIMIT_BYTES
    update = StatusUpdate(status="running", message="m" * MESSAGE_LIMIT_BYTES, actor="a" * NAME_LIMIT, data=data)
    assert update.data_json == json.dumps(data, separators=(",", ":"))


@pytest.mark.parametrize(
    ("data", "kept", "omitted"),
    [
        ({}, {}, None),
        ({"prev": ["a"], "curr": "b", "next": ["c"], "message_size_kb": 1.5}, None, None),
        ({"error": "é" * 100_000, "attempt": 2}, {"attempt": 2}, None),
        (
            {"prev": [f"earlier-{i:04d}" for i in range(500)], "curr": "x", "next": []},
            {"curr": "x", "next": []},
            ["prev"],
        ),
    ],
)
def test_gw_data_8_fit_data_json_gives_the_fitted_data_and_its_compact_json(
    data: dict[str, object], kept: dict[str, object] | None, omitted: list[str] | None
) -> None:
    fitted, text = fit_data_json(data)
    expected = dict(data if kept is None else kept)
    if "error" in data:
        assert isinstance(fitted["error"], str) and fitted["error"].endswith("\u2026")
        assert len(fitted["error"].encode("utf-8")) <= ERROR_LIMIT_BYTES
        expected["error"] = fitted["error"]
    if omitted is not None:
        expected["omitted"] = omitted
    assert fitted == expected
    assert text == json.dumps(fitted, separators=(",", ":"), ensure_ascii=False)
    update = StatusUpdate(status="running", data=fitted, encoded_data=text)
    assert update.data_json == text
    # replace() with other data encodes that data: the given text does not outlive the data it encoded
    assert dataclasses.replace(update, data={"b": 2}).data_json == '{"b":2}'
