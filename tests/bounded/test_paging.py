"""``paginate``: pages round-trip through signed cursors; forged and stale ones are refused."""

from __future__ import annotations

import base64
import re
import struct
import subprocess
import sys
import urllib.parse

import pytest

from strategies import InvalidCursor, Page, bound_result, paginate

RECORDS = [{"id": i, "name": f"rec {i}"} for i in range(23)]
KEY = b"k" * 32


def _all_pages(records: list[dict[str, object]], size: int, key: bytes | None = None) -> list[Page]:
    pages = [paginate(records, page_size=size, key=key)]
    while pages[-1].has_more:
        pages.append(paginate(records, page_size=size, cursor=pages[-1].next_cursor, key=key))
    return pages


@pytest.mark.parametrize("size", [1, 5, 22, 23, 100])
def test_pages_round_trip_through_the_cursor(size: int) -> None:
    pages = _all_pages(RECORDS, size)
    assert [item for page in pages for item in page.items] == RECORDS
    assert all(p.has_more and p.next_cursor for p in pages[:-1])
    assert not pages[-1].has_more and pages[-1].next_cursor is None
    assert all(len(p.items) == size for p in pages[:-1])


def test_cursors_are_url_safe_and_short() -> None:
    cursor = paginate(RECORDS, page_size=5).next_cursor
    assert cursor is not None
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    assert urllib.parse.quote(cursor, safe="") == cursor
    assert len(cursor) == 50


def test_an_empty_record_set_is_one_empty_page() -> None:
    assert paginate([], page_size=5) == Page(items=[], has_more=False, next_cursor=None)


def _forge(cursor: str, offset: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw[1:5] = struct.pack(">I", offset)
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def test_a_cursor_reencoded_by_hand_is_refused() -> None:
    cursor = paginate(RECORDS, page_size=5).next_cursor
    assert cursor is not None
    assert _forge(cursor, 5) == cursor  # the decoding above is right
    with pytest.raises(InvalidCursor, match="signature"):
        paginate(RECORDS, page_size=5, cursor=_forge(cursor, 20))


def test_a_cursor_of_another_key_is_refused() -> None:
    cursor = paginate(RECORDS, page_size=5, key=KEY).next_cursor
    assert paginate(RECORDS, page_size=5, cursor=cursor, key=KEY).items == RECORDS[5:10]
    with pytest.raises(InvalidCursor, match="another key"):
        paginate(RECORDS, page_size=5, cursor=cursor)
    with pytest.raises(InvalidCursor):
        paginate(RECORDS, page_size=5, cursor=cursor, key=b"x" * 32)


@pytest.mark.parametrize(
    "changed",
    [RECORDS[1:], [*RECORDS, {"id": 99}], [{**RECORDS[0], "name": "other"}, *RECORDS[1:]]],
    ids=["shorter", "longer", "edited"],
)
def test_a_stale_cursor_is_refused(changed: list[dict[str, object]]) -> None:
    cursor = paginate(RECORDS, page_size=5).next_cursor
    with pytest.raises(InvalidCursor, match="stale"):
        paginate(changed, page_size=5, cursor=cursor)


@pytest.mark.parametrize("cursor", ["", "abc", "!!!!", "é", "A" * 50, 42])
def test_malformed_cursors_are_refused(cursor: object) -> None:
    with pytest.raises(InvalidCursor):
        paginate(RECORDS, page_size=5, cursor=cursor)  # type: ignore[arg-type]


def test_a_cursor_with_padding_or_junk_is_refused() -> None:
    cursor = paginate(RECORDS, page_size=5).next_cursor
    assert cursor is not None
    for variant in (cursor + "==", cursor[:10] + "." + cursor[10:]):
        with pytest.raises(InvalidCursor):
            paginate(RECORDS, page_size=5, cursor=variant)


def test_invalid_cursor_is_a_value_error() -> None:
    assert issubclass(InvalidCursor, ValueError)


def test_the_default_key_ends_with_the_process() -> None:
    code = f"from strategies import paginate; print(paginate({RECORDS!r}, page_size=5).next_cursor)"
    other = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert other and other != paginate(RECORDS, page_size=5).next_cursor
    with pytest.raises(InvalidCursor, match="signature"):
        paginate(RECORDS, page_size=5, cursor=other)


@pytest.mark.parametrize(("key", "error"), [(b"short", ValueError), ("k" * 32, TypeError)])
def test_keys_must_be_long_enough_bytes(key: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="key"):
        paginate(RECORDS, page_size=5, key=key)  # type: ignore[arg-type]


def test_page_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="page_size"):
        paginate(RECORDS, page_size=0)


def test_a_page_is_bounded_as_compact_json() -> None:
    page = paginate(RECORDS, page_size=2, key=KEY)
    text = bound_result(page, max_tokens=500)
    assert text == (
        '{"items":[{"id":0,"name":"rec 0"},{"id":1,"name":"rec 1"}],'
        f'"has_more":true,"next_cursor":"{page.next_cursor}"}}'
    )
