"""``append_if`` (messages and the session's record together, only over the expected
revision) and ``locate`` (the session holding a message), on every backend."""

from __future__ import annotations

import pytest

from store.contract import RECORD_KEY, HistoryBackend
from store.errors import InvalidInput, RecordConflict
from tests.conformance.conftest import Stores
from tests.groups.conversations import assistant, user


async def test_a_first_append_if_creates_the_session_with_its_record(
    store: HistoryBackend,
) -> None:
    ids = await store.append_if(
        "s", [user("u1", "hi"), assistant("a1", "hello")], record={"revision": "r1"}, expected=None
    )
    assert ids == ["u1", "a1"]
    assert [m.message_id for m in await store.history("s")] == ["u1", "a1"]
    assert (await store.get_metadata("s"))[RECORD_KEY] == {"revision": "r1"}


async def test_append_if_over_the_expected_revision_replaces_the_record_and_keeps_the_rest(
    store: HistoryBackend,
) -> None:
    await store.set_metadata("s", {"owner": "ada"})
    await store.append_if("s", [user("u1", "hi")], record={"revision": "r1"}, expected=None)
    await store.append_if(
        "s", [assistant("a1", "yo")], record={"revision": "r2", "n": 2}, expected="r1"
    )
    metadata = await store.get_metadata("s")
    assert metadata == {"owner": "ada", RECORD_KEY: {"revision": "r2", "n": 2}}
    assert [m.message_id for m in await store.history("s")] == ["u1", "a1"]


async def test_an_empty_batch_writes_the_record_alone(store: HistoryBackend) -> None:
    await store.append_if("s", [], record={"revision": "r1"}, expected=None)
    info = await store.session("s")
    assert (info.stored_messages, info.metadata[RECORD_KEY]) == (0, {"revision": "r1"})


@pytest.mark.parametrize("expected", [None, "r0", "r2"])
async def test_another_revision_is_a_conflict_and_stores_nothing(
    store: HistoryBackend, expected: str | None
) -> None:
    await store.append_if("s", [user("u1", "hi")], record={"revision": "r1"}, expected=None)
    with pytest.raises(RecordConflict, match="holds record revision 'r1'") as raised:
        await store.append_if(
            "s", [assistant("a1", "late")], record={"revision": "r9"}, expected=expected
        )
    assert (raised.value.expected, raised.value.found) == (expected, "r1")
    assert [m.message_id for m in await store.history("s")] == ["u1"]
    assert (await store.get_metadata("s"))[RECORD_KEY] == {"revision": "r1"}


async def test_expecting_a_record_of_an_absent_session_is_a_conflict(
    store: HistoryBackend,
) -> None:
    with pytest.raises(RecordConflict):
        await store.append_if("s", [user("u1", "hi")], record={"revision": "r1"}, expected="r0")
    assert await store.sessions() == []


async def test_a_message_refused_by_append_leaves_the_record_as_it_was(
    store: HistoryBackend,
) -> None:
    await store.append_if("s", [user("u1", "hi")], record={"revision": "r1"}, expected=None)
    with pytest.raises(InvalidInput):
        await store.append_if(
            "s", [user("u1", "other text")], record={"revision": "r2"}, expected="r1"
        )
    assert (await store.get_metadata("s"))[RECORD_KEY] == {"revision": "r1"}


@pytest.mark.parametrize(
    ("record", "says"),
    [({}, "string 'revision'"), ({"revision": 3}, "string 'revision'"), ([], "JSON object")],
)
async def test_a_record_without_a_string_revision_is_refused(
    store: HistoryBackend, record: object, says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):
        await store.append_if("s", [], record=record, expected=None)  # type: ignore[arg-type]
    assert await store.sessions() == []


async def test_a_fork_carries_the_record_and_a_tail_refuses_append_if(
    store: HistoryBackend,
) -> None:
    await store.append_if(
        "s", [user("u1", "hi"), assistant("a1", "yo")], record={"revision": "r1"}, expected=None
    )
    await store.fork("s", at="u1", new_session_id="f")
    assert (await store.get_metadata("f"))[RECORD_KEY] == {"revision": "r1"}
    await store.append_if("f", [assistant("a2", "fork")], record={"revision": "f1"}, expected="r1")
    assert (await store.get_metadata("s"))[RECORD_KEY] == {"revision": "r1"}
    await store.rewind("s", to="u1")
    [tail] = [b for b in await store.branches("s") if b.relation == "tail"]
    with pytest.raises(InvalidInput):
        await store.append_if(tail.session_id, [], record={"revision": "t"}, expected="r1")


async def test_locate_finds_the_session_holding_a_message(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi"), assistant("a1", "yo")])
    await store.append("t", [user("u2", "other")])
    assert await store.locate("a1") == "s"
    assert await store.locate("u2") == "t"
    assert await store.locate("nowhere") is None


async def test_locate_finds_a_superseded_message_in_its_tail(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi"), assistant("a1", "yo")])
    await store.rewind("s", to="u1")
    [tail] = [b for b in await store.branches("s") if b.relation == "tail"]
    assert await store.locate("a1") == tail.session_id
    assert [m.message_id for m in await store.history(tail.session_id)] == ["u1", "a1"]
    assert await store.locate("u1") == "s"


async def test_locate_finds_a_fork_after_its_parent_is_deleted(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi"), assistant("a1", "yo")])
    await store.fork("s", new_session_id="f")
    assert await store.locate("a1") == "s"
    await store.delete_session("s")
    assert await store.locate("a1") == "f"
    assert [m.message_id for m in await store.history("f")] == ["u1", "a1"]


async def test_locate_stays_within_the_tenant(stores: Stores) -> None:
    ours = await stores.open()
    theirs = await stores.open(tenant="other")
    await theirs.append("s", [user("u1", "hi")])
    assert await ours.locate("u1") is None
    assert await theirs.locate("u1") == "s"


async def test_locate_refuses_an_id_that_is_not_text(store: HistoryBackend) -> None:
    with pytest.raises(InvalidInput, match="message_id must be a string"):
        await store.locate(7)  # type: ignore[arg-type]
