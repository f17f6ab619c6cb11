"""Session titles: set, replaced, removed, listed, carried by a fork; bad titles and
tails refused; the session created when absent, as ``set_metadata`` does."""

from __future__ import annotations

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from tests.groups.conversations import user


async def test_a_title_is_set_replaced_listed_and_removed(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi")])
    before = await store.session("s")
    assert before.title is None
    await store.set_title("s", "Trip to Kyoto — 東京 first")
    after = await store.session("s")
    assert after.title == "Trip to Kyoto — 東京 first"
    assert after.revision > before.revision and after.updated_at >= before.updated_at
    assert [(s.session_id, s.title) for s in await store.sessions()] == [
        ("s", "Trip to Kyoto — 東京 first")
    ]
    await store.set_title("s", "Kyoto")
    assert (await store.session("s")).title == "Kyoto"
    await store.set_title("s", None)
    assert (await store.session("s")).title is None
    assert [m.message_id for m in await store.history("s")] == ["u1"]


async def test_set_title_creates_the_session(store: HistoryBackend) -> None:
    await store.set_title("new", "Named before its first message")
    info = await store.session("new")
    assert (info.title, info.stored_messages) == ("Named before its first message", 0)


async def test_a_fork_starts_with_its_parents_title(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi"), user("u2", "again")])
    await store.set_title("s", "Parent")
    fork = await store.fork("s", at="u1", new_session_id="f")
    assert fork.title == "Parent"
    await store.set_title("f", "Child")
    assert ((await store.session("s")).title, (await store.session("f")).title) == (
        "Parent",
        "Child",
    )


@pytest.mark.parametrize(
    ("title", "says"),
    [
        ("", "more than whitespace"),
        ("   ", "more than whitespace"),
        ("x" * 501, "at most 500"),
        ("two\nlines", "one line"),
        (42, "must be a string"),
    ],
)
async def test_a_bad_title_is_refused_in_one_line(
    store: HistoryBackend, title: object, says: str
) -> None:
    await store.append("s", [user("u1", "hi")])
    await store.set_title("s", "kept")
    with pytest.raises(InvalidInput) as refused:
        await store.set_title("s", title)  # type: ignore[arg-type]
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert (await store.session("s")).title == "kept"


async def test_a_superseded_tail_is_read_only_for_titles(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi"), user("u2", "again")])
    await store.rewind("s", to="u1")
    [tail] = [b for b in await store.branches("s") if b.relation == "tail"]
    with pytest.raises(InvalidInput, match="superseded tail"):
        await store.set_title(tail.session_id, "a tail")
    assert (await store.session("s")).title is None
