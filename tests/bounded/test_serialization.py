"""The serialization rule: compact JSON, pydantic's JSON mode for other values, NaN refused."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from strategies.bounded import compact_dumps, result_text


class Colour(enum.Enum):
    RED = "red"


class Row(BaseModel):
    row_id: int = Field(alias="id")
    price: Decimal
    seen: dt.datetime


@dataclasses.dataclass
class Point:
    x: int
    tags: tuple[str, ...]


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -3, 10**30, 1.5, -0.0, 1e16, "", "é ü 漢字", [], {}, {"a": [1, {"b": None}]}],
)
def test_json_values_are_compact_json(value: Any) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert compact_dumps(value) == expected
    assert json.loads(compact_dumps(value)) == value


def test_no_space_after_separators_and_no_ascii_escapes() -> None:
    assert compact_dumps({"a": [1, 2], "b": "café"}) == '{"a":[1,2],"b":"café"}'


def test_a_str_is_the_result_text_as_it_is() -> None:
    assert result_text('{"a": 1}') == '{"a": 1}'
    assert result_text("plain") == "plain"
    assert compact_dumps("plain") == '"plain"'
    assert result_text({"a": 1}) == '{"a":1}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.UTC), '"2024-05-01T09:30:00Z"'),
        (dt.datetime(2024, 5, 1, 9, 30), '"2024-05-01T09:30:00"'),
        (dt.date(2024, 5, 1), '"2024-05-01"'),
        (dt.time(9, 30), '"09:30:00"'),
        (dt.timedelta(hours=1, minutes=30), '"PT1H30M"'),
        (Decimal("12.50"), '"12.50"'),
        (uuid.UUID(int=1), '"00000000-0000-0000-0000-000000000001"'),
        (Colour.RED, '"red"'),
        ((1, "a"), '[1,"a"]'),
        (frozenset({3}), "[3]"),
        (b"bytes", '"bytes"'),
        (Path("/tmp/x"), '"/tmp/x"'),
        (Point(1, ("a",)), '{"x":1,"tags":["a"]}'),
    ],
)
def test_other_values_follow_pydantic_json_mode(value: Any, expected: str) -> None:
    assert compact_dumps(value) == expected


def test_models_use_their_aliases_and_nest() -> None:
    row = Row(id=7, price=Decimal("1.10"), seen=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    expected = '{"id":7,"price":"1.10","seen":"2024-01-01T00:00:00Z"}'
    assert compact_dumps(row) == expected
    assert compact_dumps({"rows": [row]}) == '{"rows":[' + expected + "]}"
    assert compact_dumps(row) == row.model_dump_json(by_alias=True)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, {"a": [1, math.nan]}, Point(1, ()).__class__(math.inf, ())],
)
def test_nan_and_infinities_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="NaN"):
        compact_dumps(value)


def test_nan_inside_a_model_is_refused() -> None:
    class Measure(BaseModel):
        value: float

    with pytest.raises(ValueError, match="NaN"):
        compact_dumps(Measure(value=math.nan))


def test_unknown_objects_are_refused_with_their_type() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        compact_dumps({"x": Opaque()})


def test_mapping_keys_must_be_json_scalars() -> None:
    assert compact_dumps({1: "a", None: "b"}) == '{"1":"a","null":"b"}'
    with pytest.raises(TypeError):
        compact_dumps({(1, 2): "a"})


def test_a_value_that_refers_to_itself_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        compact_dumps(loop)
