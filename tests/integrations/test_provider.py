"""The two-phase provider, the replay rule, the session-id rule and the strategy adapter."""

from __future__ import annotations

import pytest
from agent_framework import Content
from agent_framework import Message as AFMessage
from agent_framework._sessions import filter_new_messages
from hypothesis import given, settings
from hypothesis import strategies as st

from store.formats import ORIGINAL_ID_KEY
from store.integrations.agent_framework import (
    ChatledgerHistoryProvider,
    MissingSessionId,
    as_agent_framework,
    from_af_messages,
)
from store.memory import InMemoryHistoryStore
from store.provider import TwoPhaseProvider, message_identity, new_messages
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import Tokenizer
from strategies.truncation import TruncationStrategy

# -- the replay rule -------------------------------------------------------------------

_af_messages = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant"]),
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, "id1", "id2", "id3"]),
    ),
    max_size=6,
)


def _af(items: list[tuple[str, str, str | None]]) -> list[AFMessage]:
    return [AFMessage(role=r, contents=[t], message_id=i) for r, t, i in items]


@settings(max_examples=300, deadline=None)
@given(existing=_af_messages, incoming=_af_messages)
def test_replay_rule_matches_agent_framework_without_positional_ids(
    existing: list[tuple[str, str, str | None]], incoming: list[tuple[str, str, str | None]]
) -> None:
    old, new = _af(existing), _af(incoming)
    expected = [m.text for m in filter_new_messages(old, new)]
    got = new_messages(from_af_messages(old), from_af_messages(new))
    assert [m.text for m in got] == expected
    assert len(got) == len(filter_new_messages(old, new))


def test_positional_ids_are_not_identities() -> None:
    stored = from_af_messages(
        [
            AFMessage(role="user", contents=["hi"], message_id="msg_0"),
            AFMessage(role="assistant", contents=["yo"], message_id="msg_1"),
        ]
    )
    later = [
        AFMessage(role="user", contents=["other"], message_id="msg_0"),
        AFMessage(role="assistant", contents=["more"], message_id="msg_1"),
    ]
    # Agent Framework takes the positional ids as identities and drops both as replays.
    assert (
        filter_new_messages(_af([("user", "hi", "msg_0"), ("assistant", "yo", "msg_1")]), later)
        == []
    )
    assert stored[0].metadata[ORIGINAL_ID_KEY] == "msg_0"
    assert [m.text for m in new_messages(stored, from_af_messages(later))] == ["other", "more"]
    # A whole-transcript replay is still recognised, in order.
    replay = from_af_messages(
        [
            AFMessage(role="user", contents=["hi"], message_id="msg_0"),
            AFMessage(role="assistant", contents=["yo"], message_id="msg_1"),
            *later,
        ]
    )
    assert [m.text for m in new_messages(stored, replay)] == ["other", "more"]


def test_content_bookkeeping_added_after_a_save_does_not_hide_a_replay() -> None:
    call = Content.from_function_call(call_id="c1", name="lookup", arguments={"q": 1})
    saved = from_af_messages([AFMessage(role="assistant", contents=[call])])
    call.id = "af-call-1"  # what Agent Framework does once it runs the call
    later = from_af_messages([AFMessage(role="assistant", contents=[call])])
    assert later[0].contents[0].extra != saved[0].contents[0].extra
    assert message_identity(later[0]) == message_identity(saved[0])
    assert new_messages(saved, later) == []
    other = Content.from_function_call(call_id="c1", name="lookup", arguments={"q": 2})
    changed = from_af_messages([AFMessage(role="assistant", contents=[other])])
    assert message_identity(changed[0]) != message_identity(saved[0])


def test_a_repeated_user_message_without_id_is_kept() -> None:
    stored = from_af_messages([AFMessage(role="user", contents=["again"])])
    incoming = from_af_messages([AFMessage(role="user", contents=["again"])])
    assert new_messages(stored, incoming) == incoming


# -- the provider ----------------------------------------------------------------------


def _text(role: str, text: str) -> Message:
    return Message.text_message(role, text)


async def test_save_turn_skips_replays_and_compacts_at_end_of_turn(
    memory_store: InMemoryHistoryStore,
) -> None:
    after = TruncationStrategy(max_n=2, compact_to=2)
    phases = TwoPhaseProvider(memory_store, after_strategy=after)
    first = [_text("user", "one"), _text("assistant", "1")]
    saved = await phases.save_turn("s", first, end_of_turn=False)
    assert saved.replayed == 0 and len(saved.appended) == 2 and saved.compaction is None
    second = [*first, _text("user", "two"), _text("assistant", "2")]
    saved = await phases.save_turn("s", second, end_of_turn=True)
    assert saved.replayed == 2 and len(saved.appended) == 2
    assert saved.compaction is not None and saved.compaction.phase == "after_run"
    stored = await memory_store.history("s", include_excluded=True)
    assert [r.message.text for r in stored] == ["one", "1", "two", "2"]
    assert [m.text for m in await phases.load("s")] == ["two", "2"]


def test_window_arguments_give_the_context_window_strategy(
    memory_store: InMemoryHistoryStore,
) -> None:
    phases = TwoPhaseProvider(
        memory_store, max_context_window_tokens=1000, max_output_tokens=200, reserved_tokens=50
    )
    assert isinstance(phases.before_strategy, ContextWindowCompactionStrategy)
    assert phases.after_strategy is phases.before_strategy
    own = TruncationStrategy(max_n=3, compact_to=2)
    mixed = TwoPhaseProvider(
        memory_store, before_strategy=own, max_context_window_tokens=1000, max_output_tokens=200
    )
    assert mixed.before_strategy is own
    assert isinstance(mixed.after_strategy, ContextWindowCompactionStrategy)
    with pytest.raises(ValueError, match="both"):
        TwoPhaseProvider(memory_store, max_context_window_tokens=1000)
    with pytest.raises(ValueError, match="reserved_tokens"):
        TwoPhaseProvider(memory_store, reserved_tokens=10)


async def test_none_session_id_is_an_error(memory_store: InMemoryHistoryStore) -> None:
    provider = ChatledgerHistoryProvider(memory_store)
    with pytest.raises(MissingSessionId, match="session"):
        await provider.get_messages(None)
    with pytest.raises(MissingSessionId):
        await provider.save_messages(None, [AFMessage(role="user", contents=["x"])])


async def test_harness_batches_compact_only_when_no_call_is_left_open(
    memory_store: InMemoryHistoryStore,
) -> None:
    provider = ChatledgerHistoryProvider(
        memory_store, after_strategy=TruncationStrategy(max_n=1, compact_to=1)
    )
    call = Content.from_function_call(call_id="c1", name="lookup", arguments={})
    result = Content.from_function_result(call_id="c1", result="r")
    await provider.save_messages(
        "h", [AFMessage(role="user", contents=["q"]), AFMessage(role="assistant", contents=[call])]
    )
    assert provider.last_save is not None and provider.last_save.compaction is None
    await provider.save_messages(
        "h",
        [AFMessage(role="tool", contents=[result]), AFMessage(role="assistant", contents=["a"])],
    )
    assert provider.last_save.compaction is not None
    assert len(await memory_store.history("h", include_excluded=True)) == 4


async def test_live_saves_drop_annotations_and_import_keeps_them(
    memory_store: InMemoryHistoryStore,
) -> None:
    provider = ChatledgerHistoryProvider(memory_store)
    flagged = AFMessage(role="user", contents=["old"], additional_properties={"_excluded": True})
    answer = AFMessage(role="assistant", contents=["ok"])
    await provider.save_messages("live", [flagged, answer])
    assert [m.text for m in await memory_store.context("live")] == ["old", "ok"]
    await provider.import_messages("imported", [flagged, answer])
    assert [m.text for m in await memory_store.context("imported")] == ["ok"]
    assert [e.phase for e in await memory_store.audit("imported")] == ["import"]


async def test_constructor_opens_nothing_and_aclose_releases_the_store() -> None:
    provider = ChatledgerHistoryProvider(url="sqlite:///does/not/exist/nowhere.db")
    assert not provider._lease.opened  # nothing opened
    async with provider:
        pass
    assert not provider._lease.opened


# -- the strategy adapter --------------------------------------------------------------


async def test_as_agent_framework_marks_exclusions_in_place(tokenizer: Tokenizer) -> None:
    messages = [
        AFMessage(role="user", contents=[f"question {i} " + "word " * 50]) for i in range(6)
    ]
    adapter = as_agent_framework(TruncationStrategy(max_n=2, compact_to=2))
    assert await adapter(messages) is True
    kept = [m for m in messages if not m.additional_properties.get("_excluded")]
    assert [m.text.split()[1] for m in kept] == ["4", "5"]
    assert all(m.additional_properties.get("_exclude_reason") for m in messages[:4])
    assert await adapter(messages) is False  # idempotent on its own result


async def test_a_request_without_an_after_strategy_ends_with_the_turn(
    memory_store: InMemoryHistoryStore,
) -> None:
    """A provider that only projects runs what was asked at the end of the turn, with
    its before-call strategy, so the request never outlives the turn."""
    phases = TwoPhaseProvider(memory_store, before_strategy="truncation:max_n=100,compact_to=2")
    chat = [Message.text_message("user" if n % 2 == 0 else "assistant", f"m{n}") for n in range(8)]
    await phases.save_turn("s", chat, end_of_turn=True)
    assert len(await phases.load("s")) == 8
    assert await phases.request_compaction("s", reason="model_requested") is None
    assert len(await phases.load("s")) == 2  # the projection compacts as asked
    done = await phases.save_turn("s", [], end_of_turn=True, existing=())
    assert done.compaction is not None and done.compaction.reason == "model_requested"
    assert done.compaction.phase == "after_run"
    # nothing waits any more: the next turns project as the triggers say
    await phases.save_turn("s", [Message.text_message("user", "again")], end_of_turn=True)
    assert len(await phases.load("s")) == 3
