"""The SQL store's group and open-call rows: what annotating the whole history gives.

The behaviour every backend shares is in ``tests/conformance/``; these tests read the rows
behind it.
"""

from __future__ import annotations

from store import HistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.store.helpers import comparable, expected_groups, group_rows, open_call_rows


async def test_seq_is_gapless_and_groups_match_whole_annotation(store: HistoryStore) -> None:
    messages = [
        system("s1", "rules"),
        user("u1", "question"),
        assistant("r1", reasoning()),
        assistant("a1", call("c1"), call("c2")),
        tool("t1", result("c1")),
        user("u2", "and?"),
        tool("t2", result("c2")),  # late result joins its call's group
        assistant("a2", call("c3")),
        tool("t3", result("nope")),  # orphan
        assistant("a3", "done"),
    ]
    for start in range(0, len(messages), 3):
        await store.append("s", messages[start : start + 3])
    stored = await store.history("s")
    assert [m.seq for m in stored] == list(range(1, len(messages) + 1))
    assert [m.message for m in stored] == messages
    assert comparable(await group_rows(store, "s")) == expected_groups(store, messages)
    assert await open_call_rows(store, "s") == {"c3": ("group_a2", False)}
    info = await store.session("s")
    groups = expected_groups(store, messages)
    assert info.stored_messages == info.active_messages == len(messages)
    assert info.stored_groups == info.active_groups == len(groups)
    assert info.stored_tokens == sum(g["token_count"] for g in groups.values())


async def test_late_result_answering_two_pending_groups_merges_them(store: HistoryStore) -> None:
    messages = [
        user("u1", "go"),
        assistant("a1", call("x")),
        assistant("a2", call("y")),
        tool("t1", result("x"), result("y")),
    ]
    await store.append("s", messages[:3])
    await store.append("s", messages[3:])
    rows = await group_rows(store, "s")
    assert comparable(rows) == expected_groups(store, messages)
    assert "group_a2" not in rows
    assert [m.group_id for m in await store.history("s")][1:] == ["group_a1"] * 3
    assert await open_call_rows(store, "s") == {}
    assert (await store.session("s")).stored_groups == 2


async def test_deleting_a_session_removes_its_rows(store: HistoryStore) -> None:
    await store.append("s", [user("u1", "hi"), assistant("a1", call("c1"))])
    await store.append("t", [user("u1", "hi")])
    assert await open_call_rows(store, "s") == {"c1": ("group_a1", False)}
    await store.delete_session("s")
    assert await group_rows(store, "s") == {}
    assert await open_call_rows(store, "s") == {}
    assert set(await group_rows(store, "t")) == {"group_u1"}


async def test_recount_rewrites_the_group_rows(db_url: str) -> None:
    message = Message.text_message("user", "a fairly long sentence " * 5)
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as first:
        await first.append("s", [message])
        [before] = await first.history("s")
        assert (await group_rows(first, "s"))[before.group_id]["token_count"] == before.token_count
    async with HistoryStore.open(db_url, tokenizer=TiktokenTokenizer("o200k_base")) as second:
        await second.recount("s")
        [stored] = await second.history("s")
        assert stored.token_count != before.token_count
        assert (await group_rows(second, "s"))[stored.group_id]["token_count"] == stored.token_count
