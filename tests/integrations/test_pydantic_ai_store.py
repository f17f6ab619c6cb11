"""Pydantic AI's ``ConversationStore`` kept in chatledger: an agent with a tool runs turns
through :class:`ChatledgerConversationStore` on every backend, resumes from a new store
object, and branches and forks exactly as Pydantic AI's own in-memory store does; stale
revisions conflict, scopes are enforced, entries read back equal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryImage,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from store import HistoryStore
from store.contract import HistoryBackend
from store.integrations.pydantic_ai import ENTRY_KEY, ChatledgerConversationStore
from tests.integrations.conftest import AnyStore

VOLATILE = {"timestamp", "request_timestamp", "run_id", "duration"}
"""Fields two runs of the same script never share (clocks and run ids)."""


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool once a turn, then answer with what it returned."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"the sum is {returned[0].content}")])
    prompt = next(p for p in last.parts if isinstance(p, UserPromptPart))
    size = len(str(prompt.content))
    return ModelResponse(
        parts=[
            ToolCallPart("add", {"a": size, "b": len(messages)}, tool_call_id=f"c{len(messages)}")
        ]
    )


def make_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(_reply), instructions="Add numbers with the tool.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def shape(messages: list[ModelMessage]) -> list[Any]:
    """The messages without what differs between two runs of one script."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(m) for m in ModelMessagesTypeAdapter.dump_python(messages, mode="json")]


async def turn(store: ConversationStore, conversation_id: str, prompt: str, **kw: Any) -> None:
    """One turn: load (or start) the conversation, run the agent, save."""
    loaded = await store.load(conversation_id, **kw) or Conversation(
        conversation_id=conversation_id
    )
    result = await make_agent().run(prompt, conversation=loaded)
    await store.save(result, **kw)


Script = Callable[[ConversationStore], Awaitable[dict[str, list[ModelMessage]]]]


async def branch_and_fork(store: ConversationStore) -> dict[str, list[ModelMessage]]:
    """Three turns, a branch from the second turn, a fork of the first turn, a turn on
    each, and a branch back to the history the first branch left."""
    for prompt in ("one", "two two", "three three three"):
        await turn(store, "c", prompt)
    seen: dict[str, list[ModelMessage]] = {}
    loaded = await store.load("c")
    assert loaded is not None
    seen["three turns"] = loaded.messages
    branched = await store.branch("c", at=8, expected_revision=loaded.revision)
    await store.save(await make_agent().run("again", conversation=branched))
    forked = await store.fork("c", at=4, new_conversation_id="f")
    await store.save(await make_agent().run("forked", conversation=forked))
    await turn(store, "f", "and on")
    for name in ("c", "f"):
        again = await store.load(name)
        assert again is not None
        seen[name] = again.messages
    record = await store.read_record("c")
    assert record is not None and len(record.branches) == 1
    back = await store.branch("c", from_entry=record.branches[0], expected_revision=record.revision)
    seen["branched back"] = back.messages
    await store.save(await make_agent().run("after", conversation=back))
    for name in ("c", "f"):
        again = await store.load(name)
        assert again is not None
        seen[f"{name} at the end"] = again.messages
    short = await store.load("c", limit=3)
    assert short is not None
    seen["c limit 3"] = short.messages
    return seen


async def test_three_turns_with_a_tool_are_stored_and_resume_from_a_new_store(
    any_store: AnyStore,
) -> None:
    first = ChatledgerConversationStore(any_store)
    for prompt in ("one", "two", "three"):
        await turn(first, "c", prompt)
    resumed = ChatledgerConversationStore(any_store)
    loaded = await resumed.load("c")
    assert loaded is not None and len(loaded.messages) == 12
    tools = [p for m in loaded.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [t.content for t in tools] == [3 + 1, 3 + 5, 5 + 9]
    await resumed.save(await make_agent().run("four", conversation=loaded))
    stored = await any_store.history("c")
    assert [m.message_id for m in stored if ENTRY_KEY in m.message.metadata] == [
        e.id for e in await resumed.load_entries("c") or []
    ]
    assert {m.message.role for m in stored} == {"user", "assistant", "tool"}


async def test_a_url_store_resumes_after_it_is_closed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pyd.db'}"
    first = ChatledgerConversationStore(url=url)
    await turn(first, "c", "hello")
    await first.aclose()
    second = ChatledgerConversationStore(url=url)
    loaded = await second.load("c")
    assert loaded is not None and len(loaded.messages) == 4
    await second.aclose()


async def test_branch_and_fork_give_the_histories_of_the_in_memory_store(
    any_store: AnyStore,
) -> None:
    expected = await branch_and_fork(InMemoryConversationStore())
    found = await branch_and_fork(ChatledgerConversationStore(any_store))
    assert found.keys() == expected.keys()
    for name, messages in expected.items():
        assert len(found[name]) == len(messages), name
        for index, (mine, theirs) in enumerate(
            zip(shape(found[name]), shape(messages), strict=True)
        ):
            assert mine == theirs, (name, index)


async def test_branch_rewinds_and_fork_forks_the_chatledger_sessions(
    any_store: AnyStore,
) -> None:
    await branch_and_fork(ChatledgerConversationStore(any_store))
    relations = sorted(b.relation for b in await any_store.branches("c"))
    assert relations.count("fork") == 1 and relations.count("tail") >= 1
    [parent] = [b for b in await any_store.branches("f") if b.relation == "parent"]
    assert parent.session_id == "c"
    phases = [e.phase for e in await any_store.audit("c")]
    assert "rewind" in phases and "restore" in phases


async def test_a_stale_revision_raises_conversation_conflict(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await turn(store, "c", "one")
    loaded = await store.load("c")
    again = await store.load("c")
    assert loaded is not None and again is not None
    await store.save(await make_agent().run("two", conversation=loaded))
    with pytest.raises(ConversationConflict):
        await store.save(await make_agent().run("stale", conversation=again))
    with pytest.raises(ConversationConflict):
        await store.branch("c", at=2, expected_revision=again.revision)
    with pytest.raises(ConversationConflict):
        await store.save(Conversation(conversation_id="c", messages=loaded.messages[:2]))
    current = await store.load("c")
    assert current is not None and len(current.messages) == 8


async def test_scope_is_kept_and_enforced(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await turn(store, "mine", "hello", scope="alice")
    await turn(store, "theirs", "hi", scope="bob")
    assert await store.load("mine", scope="bob") is None
    assert (await store.load("mine", scope="alice")) is not None
    assert [r.conversation_id for r in await store.list_conversations(scope="alice")] == ["mine"]
    assert {r.conversation_id for r in await store.list_conversations()} == {"mine", "theirs"}
    loaded = await store.load("mine")
    assert loaded is not None
    with pytest.raises(ConversationConflict):
        await store.save(loaded, scope="bob")
    with pytest.raises(UserError):
        await store.branch("mine", at=0, expected_revision=loaded.revision, scope="bob")
    with pytest.raises(UserError):
        await store.fork("mine", source_scope="bob")
    await store.delete("mine", scope="bob")
    with pytest.raises(UserError):
        await store.update("mine", title="nope", scope="bob")
    record = await store.read_record("mine")
    assert record is not None and (record.scope, record.title) == ("alice", None)
    forked = await store.fork("mine", new_conversation_id="copy", source_scope="alice")
    assert (await store.read_record(forked.conversation_id) or record).scope == "alice"


async def test_load_with_a_limit_reads_the_last_messages(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    for prompt in ("one", "two", "three"):
        await turn(store, "c", prompt)
    whole = await store.load("c")
    assert whole is not None
    for limit in (0, 1, 5, 12, 50):
        part = await store.load("c", limit=limit)
        assert part is not None
        assert part.messages == whole.messages[len(whole.messages) - min(limit, 12) :]
    with pytest.raises(UserError):
        await store.load("c", limit=-1)


def every_part_kind() -> list[ModelMessage]:
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("be brief", timestamp=at),
                UserPromptPart("plain text", timestamp=at),
                UserPromptPart(
                    [
                        "look:",
                        ImageUrl("https://example.com/cat.png"),
                        BinaryImage(b"\x89PNG", media_type="image/png"),
                    ],
                    timestamp=at,
                ),
            ],
            instructions="Answer in French.",
            timestamp=at,
        ),
        ModelResponse(
            parts=[
                ThinkingPart("let me think", signature="sig"),
                TextPart("calling"),
                ToolCallPart("lookup", {"q": "cat"}, tool_call_id="t1"),
                ToolCallPart("lookup", '{"q": "dog"}', tool_call_id="t2"),
                NativeToolCallPart("web_search", {"query": "x"}, tool_call_id="b1"),
                NativeToolReturnPart("web_search", {"hits": [1, 2]}, tool_call_id="b1"),
                FilePart(BinaryImage(b"GIF89a", media_type="image/gif")),
            ],
            usage=RequestUsage(input_tokens=30, output_tokens=12, cache_read_tokens=4),
            model_name="scripted",
            timestamp=at,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup", {"found": True}, tool_call_id="t1", timestamp=at),
                ToolReturnPart(
                    "lookup",
                    "bad query",
                    tool_call_id="t2",
                    outcome="retried",
                    retry=RetryInfo("model_retry", attempt=1),
                    timestamp=at,
                ),
                RetryFeedbackPart("try again", retry=RetryInfo("model_retry"), timestamp=at),
            ],
            timestamp=at,
        ),
        ModelRequest(parts=[], timestamp=at),
        ModelResponse(parts=[TextPart("fin")], timestamp=at),
    ]


async def test_every_part_kind_reads_back_equal(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    entries: list[ConversationEntry] = []
    parent: str | None = None
    for message in every_part_kind():
        entries.append(ConversationEntry(parent_id=parent, message=message))
        parent = entries[-1].id
    record = ConversationRecord(conversation_id="kinds", head_id=parent)
    await store.write_record(record, new_entries=entries, expected_revision=None)
    for entry in entries:
        assert await store.read_entry(entry.id) == entry
    assert await store.read_history(parent) == entries
    assert await store.read_history(parent, limit=2) == entries[-2:]
    assert await store.read_history(None) == []
    with pytest.raises(LookupError):
        await store.read_entry("no-such-entry")
    stored = await any_store.history("kinds")
    assert len(stored) > len(entries)  # a request is a message a part
    calls = await any_store.usage_calls("kinds")
    assert [(c.usage.model, c.usage.input_tokens, c.message_id) for c in calls] == [
        ("scripted", 30, entries[1].id)
    ]


async def test_each_response_s_usage_is_recorded_once(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await turn(store, "c", "one")
    await turn(store, "c", "two")
    loaded = await store.load("c")
    assert loaded is not None
    responses = [m for m in loaded.messages if isinstance(m, ModelResponse)]
    calls = await any_store.usage_calls("c")
    assert [c.usage.output_tokens for c in calls] == [r.usage.output_tokens for r in responses]
    assert sum(c.usage.input_tokens or 0 for c in calls) == loaded.usage.input_tokens
    await store.save(loaded)  # nothing new: nothing recorded again
    assert len(await any_store.usage_calls("c")) == len(responses)


async def test_update_keeps_title_and_metadata_through_saves(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await turn(store, "c", "one")
    await store.update("c", title="Sums", expected_title=None)
    await store.update("c", metadata={"model": "scripted"})
    await turn(store, "c", "two")
    record = await store.read_record("c")
    assert record is not None and (record.title, record.metadata) == ("Sums", {"model": "scripted"})
    with pytest.raises(ConversationConflict):
        await store.update("c", title="Other", expected_title=None)


async def test_delete_keeps_what_a_fork_still_reads(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await turn(store, "c", "one")
    await turn(store, "c", "two")
    forked = await store.fork("c", at=4, new_conversation_id="f")
    await store.delete("c")
    assert await store.load("c") is None
    assert [s.session_id for s in await any_store.sessions()] == ["f"]
    again = await store.load("f")
    assert again is not None and again.messages == forked.messages
    await turn(store, "c", "a new one")
    fresh = await store.load("c")
    assert fresh is not None and len(fresh.messages) == 4


async def test_a_session_that_is_not_a_conversation_is_not_taken_over(
    any_store: HistoryBackend,
) -> None:
    from tests.groups.support import user

    await any_store.append("c", [user("u1", "someone else's session")])
    store = ChatledgerConversationStore(any_store)
    assert await store.load("c") is None
    with pytest.raises(ConversationConflict):
        await turn(store, "c", "hello")
    assert [m.message_id for m in await any_store.history("c")] == ["u1"]


def test_a_store_and_a_url_together_are_refused(tmp_path: Path) -> None:
    from store.errors import InvalidInput

    with pytest.raises(InvalidInput, match="not both"):
        ChatledgerConversationStore(
            HistoryStore.__new__(HistoryStore), url=f"sqlite:///{tmp_path}/x.db"
        )


def _request(text: str) -> ModelRequest:
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    return ModelRequest(parts=[UserPromptPart(text, timestamp=at)], timestamp=at)


def _call(call_id: str) -> ModelResponse:
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    return ModelResponse(parts=[ToolCallPart("add", {"a": 1}, tool_call_id=call_id)], timestamp=at)


def _result(call_id: str) -> ModelRequest:
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    part = ToolReturnPart("add", 2, tool_call_id=call_id, timestamp=at)
    return ModelRequest(parts=[part], timestamp=at)


def _answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], timestamp=datetime(2026, 12, 6, tzinfo=UTC))


def _tool_turn(n: int) -> list[ModelMessage]:
    return [_request(f"q{n}"), _call(f"t{n}"), _result(f"t{n}"), _answer(f"a{n}")]


async def cuts_and_rewrites(store: ConversationStore) -> dict[str, list[ModelMessage]]:
    """Head moves that cut a tool call from its result, and a save of a rewritten history,
    with messages built here (the same on every store)."""
    seen: dict[str, list[ModelMessage]] = {}
    await store.save(Conversation(conversation_id="c", messages=_tool_turn(1) + _tool_turn(2)))
    loaded = await store.load("c")
    assert loaded is not None
    cut = await store.branch("c", at=6, expected_revision=loaded.revision)  # after a call
    seen["branch after a call"] = cut.messages
    cut.messages.extend([_result("t2"), _answer("other a2")])
    await store.save(cut)
    forked = await store.fork("c", at=2, new_conversation_id="f")  # after the first call
    seen["fork after a call"] = forked.messages
    forked.messages.extend([_result("t1"), _answer("forked a1")])
    await store.save(forked)
    loaded = await store.load("c")
    assert loaded is not None
    rewritten = Conversation(
        conversation_id="c",
        messages=[*loaded.messages[:3], _answer("rewritten a1"), *_tool_turn(3)],
        revision=loaded.revision,
    )
    await store.save(rewritten)
    record = await store.read_record("c")
    assert record is not None
    seen["branches"] = [(await store.read_entry(tip)).message for tip in record.branches]
    left = await store.fork("c", from_entry=record.branches[0], new_conversation_id="g")
    seen["fork of a left branch"] = left.messages
    left.messages.extend(_tool_turn(9))
    await store.save(left)
    for tip in record.branches:
        current = await store.read_record("c")
        assert current is not None
        back = await store.branch("c", from_entry=tip, expected_revision=current.revision)
        seen[f"back to {tip[-6:]}"] = back.messages
    for name in ("c", "f", "g"):
        again = await store.load(name)
        assert again is not None
        seen[name] = again.messages
    return seen


async def test_cuts_inside_a_tool_call_and_rewrites_match_the_in_memory_store(
    any_store: AnyStore,
) -> None:
    expected = await cuts_and_rewrites(InMemoryConversationStore())
    found = await cuts_and_rewrites(ChatledgerConversationStore(any_store))
    assert [len(v) for v in found.values()] == [len(v) for v in expected.values()]
    for (name, mine), theirs in zip(found.items(), expected.values(), strict=True):
        assert mine == theirs, name  # built here: equal to the last field


async def test_a_compacted_conversation_still_loads_whole(any_store: AnyStore) -> None:
    from strategies.truncation import TruncationStrategy

    store = ChatledgerConversationStore(any_store)
    messages = [m for n in range(4) for m in _tool_turn(n)]
    await store.save(Conversation(conversation_id="c", messages=messages))
    event = await any_store.compact("c", TruncationStrategy(max_n=4, compact_to=2))
    assert event is not None
    assert len(await any_store.history("c")) < len(
        await any_store.history("c", include_excluded=True)
    )
    loaded = await store.load("c")
    assert loaded is not None and loaded.messages == messages
    await store.save(await make_agent().run("more", conversation=loaded))
    again = await store.load("c")
    assert again is not None and again.messages[: len(messages)] == messages


async def test_a_long_conversation_loads_whole_and_by_its_last_messages(
    any_store: AnyStore,
) -> None:
    store = ChatledgerConversationStore(any_store)
    messages = [m for n in range(40) for m in _tool_turn(n)]  # 160 messages, 200 rows
    await store.save(Conversation(conversation_id="c", messages=messages))
    whole = await store.load("c")
    assert whole is not None and whole.messages == messages
    for limit in (1, 63, 64, 65, 150):
        part = await store.load("c", limit=limit)
        assert part is not None and part.messages == messages[-limit:], limit
    entries = await store.load_entries("c")
    assert entries is not None
    middle = entries[70]
    assert await store.read_history(middle.id, limit=3) == entries[68:71]


async def test_stale_writes_of_details_and_deletes_conflict(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    await store.save(Conversation(conversation_id="c", messages=_tool_turn(1)))
    record = await store.read_record("c")
    assert record is not None
    newer = Conversation(
        conversation_id="c", messages=_tool_turn(1) + _tool_turn(2), revision=record.revision
    )
    await store.save(newer)
    with pytest.raises(ConversationConflict):
        await store.write_details("c", {"title": "x"}, expected_revision=record.revision)
    with pytest.raises(ConversationConflict):
        await store.delete_record("c", expected_revision=record.revision)
    with pytest.raises(ConversationConflict):
        await store.fork("c", new_conversation_id="c")
    with pytest.raises(ConversationConflict):
        await store.write_record(
            ConversationRecord(conversation_id="d", head_id="no-such-entry"),
            expected_revision=None,
        )
    loaded = await store.load("c")
    assert loaded is not None and len(loaded.messages) == 8 and await store.load("d") is None


async def test_a_redacted_entry_reads_back_as_its_tombstone(any_store: AnyStore) -> None:
    store = ChatledgerConversationStore(any_store)
    messages = _tool_turn(1) + _tool_turn(2)
    saved = await store.save(Conversation(conversation_id="c", messages=messages))
    secret, answer = saved[4], saved[3]  # the second question, the first answer
    await any_store.redact("c", [secret.id, answer.id], reason="asked to forget")
    loaded = await store.load("c")
    assert loaded is not None and len(loaded.messages) == len(messages)
    changed = [i for i, (a, b) in enumerate(zip(loaded.messages, messages, strict=True)) if a != b]
    assert changed == [3, 4]
    assert isinstance(loaded.messages[3], ModelResponse)
    assert isinstance(loaded.messages[4], ModelRequest)
    assert "q2" not in repr(loaded.messages) and "a1" not in repr(loaded.messages)
    entries = await store.load_entries("c")
    assert entries is not None
    assert [e.parent_id for e in entries] == [None, *(e.id for e in entries[:-1])]
    assert await store.read_history(entries[4].id, limit=2) == entries[3:5]
    await store.save(await make_agent().run("after", conversation=loaded))
    assert len((await store.load("c") or loaded).messages) == len(messages) + 4
    back = await store.branch(
        "c", at=4, expected_revision=(await store.load("c") or loaded).revision
    )
    assert back.messages == loaded.messages[:4]


async def test_concurrent_saves_and_branches_of_one_revision_let_one_win(
    any_store: AnyStore,
) -> None:
    import asyncio

    store = ChatledgerConversationStore(any_store)
    await store.save(Conversation(conversation_id="c", messages=_tool_turn(1) + _tool_turn(2)))
    loaded = await store.load("c")
    assert loaded is not None
    extended = Conversation(
        conversation_id="c", messages=[*loaded.messages, *_tool_turn(3)], revision=loaded.revision
    )
    rewritten = Conversation(
        conversation_id="c",
        messages=[*loaded.messages[:4], *_tool_turn(4)],
        revision=loaded.revision,
    )
    outcomes = await asyncio.gather(
        store.save(extended),
        store.save(rewritten),
        store.branch("c", at=2, expected_revision=loaded.revision),
        return_exceptions=True,
    )
    won = [i for i, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
    assert len(won) == 1, outcomes
    assert all(
        isinstance(o, ConversationConflict) for o in outcomes if isinstance(o, BaseException)
    )
    final = await store.load("c")
    assert final is not None
    expected = [extended.messages, rewritten.messages, loaded.messages[:2]][won[0]]
    assert final.messages == expected
    stored = [m.message_id for m in await any_store.history("c", include_excluded=True)]
    entries = await store.load_entries("c") or []
    assert [i for i in stored if ":" not in i] == [e.id for e in entries]


async def test_an_entry_read_again_is_read_from_where_it_ends(any_store: AnyStore) -> None:
    """read_entry, branch(from_entry=) and read_history of an entry already read start
    their backward read at that entry, not at the session's end (review finding 9)."""
    store = ChatledgerConversationStore(any_store)
    messages = [m for n in range(40) for m in _tool_turn(n)]  # 200 rows: four pages
    await store.save(Conversation(conversation_id="c", messages=messages))
    entries = await store.load_entries("c")
    assert entries is not None
    bounds: list[int | None] = []
    history = any_store.history

    async def spied(session_id: str, **kw: Any) -> Any:
        bounds.append(kw.get("before"))
        return await history(session_id, **kw)

    any_store.history = spied  # type: ignore[method-assign]
    try:
        assert await store.read_entry(entries[2].id) == entries[2]
        assert bounds == [
            max(m.seq for m in await history("c") if m.message_id == entries[2].id) + 1
        ]
        assert await store.read_history(entries[70].id, limit=3) == entries[68:71]
        assert len(bounds) == 2
        bounds.clear()
        assert await store.read_history(entries[100].id) == entries[:101]
        assert len(bounds) == 2  # 125 rows from the entry to the start, not 200 from the end
    finally:
        del any_store.history
    record = await store.read_record("c")
    assert record is not None
    back = await store.branch("c", from_entry=entries[6].id, expected_revision=record.revision)
    assert back.messages == messages[:7]
    assert await store.read_entry(entries[150].id) == entries[150]  # now in a tail
