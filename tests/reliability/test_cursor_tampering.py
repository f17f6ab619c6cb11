"""Forged and tampered cursors: a page cursor of :func:`strategies.paginate` refuses every
change of it, and the store's keyset pages (``sessions(after=...)``, ``history(after=...,
before=...)``) never step into another tenant's rows, on every backend.

``tests/bounded/test_paging.py`` covers a cursor re-encoded by hand, of another key, of
changed records and malformed; here every bit and every length of one is tried.
"""

from __future__ import annotations

import base64

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies import InvalidCursor, paginate
from strategies.messages import Message
from tests.conformance.conftest import Stores, backend, stores

__all__ = ["backend", "stores"]

RECORDS = [{"id": i, "secret": f"row {i}"} for i in range(40)]
KEY = b"k" * 32


def _raw(cursor: str) -> bytes:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def _text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _cursor() -> str:
    cursor = paginate(RECORDS, page_size=5, key=KEY).next_cursor
    assert cursor is not None
    assert paginate(RECORDS, page_size=5, cursor=cursor, key=KEY).items == RECORDS[5:10]
    return cursor


def test_every_flipped_bit_of_a_cursor_is_refused() -> None:
    raw = _raw(_cursor())
    for index in range(len(raw)):
        for bit in range(8):
            forged = bytearray(raw)
            forged[index] ^= 1 << bit
            with pytest.raises(InvalidCursor):
                paginate(RECORDS, page_size=5, cursor=_text(bytes(forged)), key=KEY)


def test_a_cut_or_lengthened_cursor_is_refused() -> None:
    cursor = _cursor()
    raw = _raw(cursor)
    variants = [cursor[:n] for n in range(len(cursor))]
    variants += [_text(raw + bytes(n)) for n in (1, 2, 3, 16)]
    variants += [_text(raw[:n]) for n in range(len(raw))]
    for variant in variants:
        with pytest.raises(InvalidCursor):
            paginate(RECORDS, page_size=5, cursor=variant, key=KEY)


def test_a_cursor_moved_to_another_offset_with_its_tag_is_refused() -> None:
    """Splicing: the head of one valid cursor with the digest and tag of another."""
    first = _raw(_cursor())
    later = paginate(RECORDS, page_size=5, cursor=_cursor(), key=KEY).next_cursor
    assert later is not None
    second = _raw(later)
    for spliced in (first[:5] + second[5:], second[:5] + first[5:]):
        with pytest.raises(InvalidCursor):
            paginate(RECORDS, page_size=5, cursor=_text(spliced), key=KEY)


async def test_keyset_pages_stay_in_the_tenant(stores: Stores) -> None:
    victim = await stores.open(tenant="victim")
    mallory = await stores.open(tenant="mallory")
    for session in ("a", "m", "z"):
        await victim.append(session, [Message.text_message("user", f"victim {session}")])
    await mallory.append("own", [Message.text_message("user", "mallory")])
    for after in ("a", "m", "z"):  # the victim's ids, as the updated order's cursor
        with pytest.raises(InvalidInput, match="does not exist"):
            await mallory.sessions(order="updated", after=after)
    assert [s.session_id for s in await mallory.sessions(after="")] == ["own"]
    assert [s.session_id for s in await mallory.sessions(after="a", limit=10)] == ["own"]
    assert await mallory.sessions(after="own") == []
    await mallory.delete_session("own")
    with pytest.raises(InvalidInput, match="does not exist"):  # nor one deleted since
        await mallory.sessions(order="updated", after="own")
    assert await mallory.sessions(order="updated") == []


BOUNDS = [(-(2**63), None), (None, 2**63 - 1), (0, 0), (5, 1), (-1, 2), (2, None), (None, 3)]
"""``after`` and ``before`` at the ends of their range, crossed, and plain."""


async def test_seq_bounds_at_the_edges_read_only_the_session(stores: Stores) -> None:
    store: HistoryBackend = await stores.open(tenant="t")
    other = await stores.open(tenant="other")
    await other.append("s", [Message.text_message("user", f"other {n}") for n in range(3)])
    await store.append("s", [Message.text_message("user", f"mine {n}") for n in range(3)])
    for after, before in BOUNDS:
        expected = [
            f"mine {n}"
            for n in range(3)
            if (after is None or n + 1 > after) and (before is None or n + 1 < before)
        ]
        page = await store.history("s", after=after, before=before)
        assert [m.message.text for m in page] == expected, (after, before)
        streamed = store.aiter_history("s", after=after, before=before, page_size=1)
        assert [m.message.text async for m in streamed] == expected, (after, before)
