"""Paging sessions by update time, empty imports and refused arguments, on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from tests.groups.conversations import user


async def _three_sessions(store: HistoryBackend) -> list[str]:
    """Sessions ``a``, ``b``, ``c`` written in that order, so ``c`` is the newest."""
    for sid in ("a", "b", "c"):
        await store.append(sid, [user(f"{sid}-1", f"hello from {sid}")])
    return ["a", "b", "c"]


async def test_updated_order_lists_newest_first(store: HistoryBackend) -> None:
    await _three_sessions(store)
    listed = await store.sessions(order="updated")
    assert [s.session_id for s in listed] == ["c", "b", "a"]


async def test_updated_order_pages_after_a_session(store: HistoryBackend) -> None:
    await _three_sessions(store)
    first = await store.sessions(order="updated", limit=1)
    assert [s.session_id for s in first] == ["c"]
    rest = await store.sessions(order="updated", after=first[-1].session_id)
    assert [s.session_id for s in rest] == ["b", "a"]


async def test_updated_order_refuses_to_page_after_an_unknown_session(
    store: HistoryBackend,
) -> None:
    await _three_sessions(store)
    with pytest.raises(InvalidInput, match="cannot page after session 'zz': it does not exist"):
        await store.sessions(order="updated", after="zz")


async def test_unknown_order_is_refused(store: HistoryBackend) -> None:
    with pytest.raises(InvalidInput, match="unknown order 'size'"):
        await store.sessions(order="size")  # type: ignore[arg-type]


async def test_purge_refuses_a_dry_run_that_is_not_a_bool(store: HistoryBackend) -> None:
    await _three_sessions(store)
    with pytest.raises(InvalidInput, match="dry_run must be a bool, got str"):
        await store.purge(older_than=timedelta(days=1), dry_run="yes")  # type: ignore[arg-type]
    assert len(await store.sessions()) == 3


async def test_importing_nothing_into_a_new_session_creates_nothing(
    store: HistoryBackend,
) -> None:
    result = await store.import_messages("fresh", [])
    assert result.message_ids == ()
    assert result.event is None
    with pytest.raises(SessionNotFound):
        await store.session("fresh")


async def test_metadata_key_with_a_lone_surrogate_is_refused(store: HistoryBackend) -> None:
    with pytest.raises(InvalidInput, match="key holding a lone surrogate"):
        await store.set_metadata("s", {"bad\ud800": 1})


async def test_message_id_with_a_nul_character_is_refused(store: HistoryBackend) -> None:
    with pytest.raises(InvalidInput, match="message_id of message 'a\\\\x00b' holds a NUL"):
        await store.append("s", [user("a\x00b", "hi")])
    assert await store.sessions() == []
