"""A SQL import appends and applies its event in one transaction: all of it or nothing."""

from __future__ import annotations

import pytest

import store.sql.store as api_module
from store import HistoryStore
from tests.conformance.test_library_strategies import long_result_chat
from tests.store.parity import observed


async def test_an_import_is_one_transaction(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("import planning failed")

    monkeypatch.setattr(api_module, "import_changes", broken)
    await store.append("s", long_result_chat()[:2])
    before = await observed(store, "s")
    with pytest.raises(RuntimeError, match="import planning failed"):
        await store.import_messages("s", long_result_chat())
    # the appends of the failed import were rolled back with it
    assert await observed(store, "s") == before
    with pytest.raises(RuntimeError):
        await store.import_messages("fresh", long_result_chat())
    assert [i.session_id for i in await store.sessions()] == ["s"]
