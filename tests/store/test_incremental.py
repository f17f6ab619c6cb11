"""Appending in any chunks stores what annotating the whole conversation gives."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import HistoryStore
from strategies.groups import annotate
from strategies.messages import Message
from tests.groups.conversations import conversations
from tests.store.helpers import comparable, expected_groups, group_rows, open_call_rows

_sessions = itertools.count()


def _open_calls(messages: list[Message]) -> dict[str, tuple[str | None, bool]]:
    state = annotate(messages).state
    out: dict[str, tuple[str | None, bool]] = {
        call_id: (group_id, False) for call_id, group_id in state.open_calls.items()
    }
    out.update(dict.fromkeys(state.ambiguous_calls, (None, True)))
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=conversations(max_steps=16), cuts=st.lists(st.integers(1, 6), max_size=8))
async def test_chunked_appends_match_whole_annotation(
    store: HistoryStore, messages: list[Message], cuts: list[int]
) -> None:
    session_id = f"prop-{next(_sessions)}"  # one fixture store for every example
    start = 0
    for size in [*cuts, len(messages)]:
        if start >= len(messages):
            break
        await store.append(session_id, messages[start : start + size])
        start += size
    if not messages:
        return
    stored = await store.history(session_id)
    assert [m.message for m in stored] == messages
    assert [m.seq for m in stored] == list(range(1, len(messages) + 1))
    assert [m.group_id for m in stored] == [g for _, g in annotate(messages).message_groups]
    assert comparable(await group_rows(store, session_id)) == expected_groups(store, messages)
    assert await open_call_rows(store, session_id) == _open_calls(messages)
    info = await store.session(session_id)
    assert info.stored_tokens == sum(m.token_count for m in stored)
    assert info.stored_groups == len(expected_groups(store, messages))
