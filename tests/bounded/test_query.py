"""The query-side helpers: fields, record caps and text caps."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, computed_field

from strategies import cap_records, cap_text, select_fields


class Doc(BaseModel):
    id: int
    title: str
    body: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def size(self) -> int:
        return len(self.body)


@dataclasses.dataclass
class Hit:
    id: int
    score: float


def test_select_fields_keeps_the_named_fields_in_their_order() -> None:
    rows = [{"id": 1, "title": "a", "body": "long"}, {"id": 2, "body": "longer"}]
    assert select_fields(rows, ["title", "id"]) == [{"title": "a", "id": 1}, {"id": 2}]
    assert list(select_fields(rows, ["title", "id"])[0]) == ["title", "id"]


def test_select_fields_reads_models_and_dataclasses() -> None:
    doc = Doc(id=1, title="t", body="abc")
    assert select_fields([doc], ["size", "id", "model_dump"]) == [{"size": 3, "id": 1}]
    assert select_fields([Hit(1, 0.5)], ["score", "nope"]) == [{"score": 0.5}]


def test_select_fields_refuses_a_string_and_unknown_records() -> None:
    with pytest.raises(TypeError, match="sequence of field names"):
        select_fields([{"id": 1}], "id")
    with pytest.raises(TypeError, match="int"):
        select_fields([1], ["id"])


def test_select_fields_drops_repeated_names() -> None:
    assert select_fields([{"a": 1}], ["a", "a"]) == [{"a": 1}]


def test_cap_records_reads_no_further_than_the_limit() -> None:
    read: list[int] = []

    def rows() -> Iterator[int]:
        for i in range(1_000_000):
            read.append(i)
            yield i

    assert cap_records(rows(), 3) == [0, 1, 2]
    assert read == [0, 1, 2]
    assert cap_records([1, 2], 5) == [1, 2]
    assert cap_records([1, 2], 0) == []
    with pytest.raises(ValueError, match="limit"):
        cap_records([1], -1)


def test_cap_text_keeps_short_texts() -> None:
    assert cap_text("short", 20) == "short"
    assert cap_text("x" * 20, 20) == "x" * 20


def test_cap_text_counts_the_visible_marker() -> None:
    capped = cap_text("abcdefghijklmnopqrstuvwxyz", 20)
    assert capped == "abcdefgh…[truncated]"
    assert len(capped) == 20
    assert cap_text("abcdef", 4, marker="..") == "ab.."
    assert cap_text("abcdef", 2, marker="..") == ".."
    assert cap_text("abcdef", 3, marker="") == "abc"


def test_cap_text_refuses_a_limit_shorter_than_the_marker() -> None:
    with pytest.raises(ValueError, match="shorter than the marker"):
        cap_text("ab", 5)  # even when the text would fit
    with pytest.raises(ValueError, match="max_chars"):
        cap_text("ab", -1, marker="")
