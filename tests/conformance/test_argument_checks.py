"""Every method checks its session id before reading or writing anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from tests.conformance.test_library_strategies import long_result_chat
from tests.conformance.toy_strategies import ExcludeOldest
from tests.groups.conversations import user
from tests.store.parity import observed


def _calls(s: HistoryBackend, sid: str) -> list[Callable[[], Awaitable[object]]]:
    strategy = ExcludeOldest(1)
    one = [user("x1", "hi")]

    async def drain() -> None:
        async for _ in s.aiter_history(sid):
            pass

    return [
        lambda: s.append(sid, one),
        lambda: s.append(sid, []),
        lambda: s.history(sid),
        drain,
        lambda: s.session(sid),
        lambda: s.get_metadata(sid),
        lambda: s.set_metadata(sid, {"k": 1}),
        lambda: s.delete_session(sid),
        lambda: s.recount(sid),
        lambda: s.view(sid),
        lambda: s.context(sid),
        lambda: s.compact(sid, strategy),
        lambda: s.compact(sid, strategy, dry_run=True),
        lambda: s.audit(sid),
        lambda: s.excluded(sid),
        lambda: s.why(sid, "u1"),
        lambda: s.stats(sid),
        lambda: s.restore(sid, group_ids=["group_u1"]),
        lambda: s.pin(sid, ["group_u1"]),
        lambda: s.unpin(sid, ["group_u1"]),
        lambda: s.import_messages(sid, one),
    ]


@pytest.mark.parametrize("bad", ["", "s\x00", "\x00"])
async def test_every_method_checks_the_session_id(store: HistoryBackend, bad: str) -> None:
    await store.append("s", long_result_chat())
    before = await observed(store, "s")
    for attempt in _calls(store, bad):
        with pytest.raises(InvalidInput, match="session_id"):
            await attempt()
    assert await observed(store, "s") == before
    assert [i.session_id for i in await store.sessions()] == ["s"]
