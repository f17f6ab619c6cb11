"""Differential tests against Agent Framework 1.23.0 on generated conversations.

For each same-named strategy, in message-count mode and in token mode, both systems
compact the same conversation and must send the same messages, in the same order, with
the same tool-result summary texts. In token mode both count each message the same way:
the reference's tokenizer returns, for each serialized message, the count the view
cached for it (the reference would otherwise count its JSON serialization, a documented
difference of basis, tested in ``test_deviations``).

Where the reference drops what chatledger protects (a system group, the newest user
request, a call still waiting for its result), the results differ on purpose: the test
then checks that chatledger kept it. Conversations are "aligned" (no orphan results, no
stale pending calls), the shapes both group the same way. The context window collapses a
tool-call group only when its summary is smaller (a deliberate deviation): the reference's
eviction phase is given the same rule before comparing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import agent_framework as af
from agent_framework import _compaction as af_compaction
from hypothesis import event, given, settings
from hypothesis import strategies as st

from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message, TextContent
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.token_budget import TokenBudgetComposedStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.tool_result import SUMMARY_METADATA_KEY, ToolResultCompactionStrategy
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.strategies.conversations import (
    Chat,
    ViewCounts,
    calls,
    chats,
    plan_and_project,
    results,
    say,
    to_reference,
    turns,
)
from tests.strategies.invariants import assert_invariants

SETTINGS = settings(max_examples=120, deadline=None)
TOKENIZER = CharacterEstimatorTokenizer()


@dataclass(frozen=True)
class Outcome:
    """What a strategy sends: message ids in order, and the tool-result summary texts."""

    ids: list[str]
    summaries: list[str]


async def run_ours(
    chat: Chat, strategy: CompactionStrategy, *, preserve_system: bool = True
) -> tuple[View, Outcome, list[Message]]:
    view = View.from_messages(chat.messages, TOKENIZER)
    changes = await strategy.plan(view)
    after = await assert_invariants(
        view, changes, strategy=strategy, system_may_go=not preserve_system
    )
    sent = await after.project()
    summaries = [m.contents[-1] for m in sent if SUMMARY_METADATA_KEY in m.metadata]
    texts = [c.text for c in summaries if isinstance(c, TextContent)]
    return view, Outcome([m.message_id for m in sent], texts), await every_summary(view)


async def every_summary(view: View) -> list[Message]:
    """The summary message chatledger would write for each tool-call group, so that the
    reference's tokenizer counts a summary as the view counts chatledger's."""
    strategy = ToolResultCompactionStrategy(keep_last_tool_call_groups=0)
    return [s.message for s in (await strategy.plan(view)).summaries]


async def run_reference(chat: Chat, strategy: Any, tokenizer: Any = None) -> Outcome:
    messages = to_reference(chat.messages)
    sent = await af.apply_compaction(messages, strategy=strategy, tokenizer=tokenizer)
    summaries = [m.text for m in sent if str(m.message_id).startswith("tool_summary_")]
    return Outcome([str(m.message_id) for m in sent], summaries)


async def protected_dropped(view: View, reference: Outcome, *, preserve_system: bool) -> set[str]:
    """Groups chatledger protects that the reference did not send."""
    members = await view.messages()
    sent = set(reference.ids)
    last_user = view.last_user_index()
    protected: set[str] = set()
    for index, group in enumerate(view.groups):
        if group.kind == "system" and preserve_system:
            protected.add(group.group_id)
        if index == last_user:
            protected.add(group.group_id)
        after_last_user = last_user is None or index > last_user
        if group.pending_calls and after_last_user:
            protected.add(group.group_id)
    dropped = {g for g in protected if not {m.message_id for m in members[g]} <= sent}
    if not reference.ids and view.groups:
        dropped.add(view.groups[-1].group_id)  # the reference ended empty; we never do
    return dropped


async def compare(
    chat: Chat,
    ours: CompactionStrategy,
    reference: Any,
    *,
    token_mode: bool = False,
    preserve_system: bool = True,
) -> None:
    view, mine, inserted = await run_ours(chat, ours, preserve_system=preserve_system)
    tokenizer = await ViewCounts(view, inserted).load() if token_mode else None
    theirs = await run_reference(chat, reference, tokenizer)
    dropped = await protected_dropped(view, theirs, preserve_system=preserve_system)
    if dropped:
        # a deliberate deviation: the reference dropped what chatledger keeps
        event("deviation: the reference dropped a protected group")
        kept = set(mine.ids)
        members = await view.messages()
        for group_id in dropped:
            assert {m.message_id for m in members[group_id]} <= kept
        return
    event("compared" if mine.ids != [m.message_id for m in chat.messages] else "no change")
    assert mine == theirs


def _run(coro: Any) -> None:
    asyncio.run(coro)


@SETTINGS
@given(chat=chats(aligned=True), data=st.data())
def test_truncation_by_messages(chat: Chat, data: st.DataObject) -> None:
    max_n = data.draw(st.integers(1, 30))
    kwargs: dict[str, Any] = {
        "max_n": max_n,
        "compact_to": data.draw(st.integers(1, max_n)),
        "preserve_system": data.draw(st.booleans()),
        "preserve_first_user_group": data.draw(st.booleans()),
    }
    _run(
        compare(
            chat,
            TruncationStrategy(**kwargs),
            af.TruncationStrategy(**kwargs),
            preserve_system=kwargs["preserve_system"],
        )
    )


@SETTINGS
@given(chat=chats(aligned=True), data=st.data())
def test_truncation_by_tokens(chat: Chat, data: st.DataObject) -> None:
    max_n = data.draw(st.integers(1, 3000))
    compact_to = data.draw(st.integers(1, max_n))
    first = data.draw(st.booleans())
    ours = TruncationStrategy(
        max_n=max_n, compact_to=compact_to, tokenizer=TOKENIZER, preserve_first_user_group=first
    )

    async def run() -> None:
        view = View.from_messages(chat.messages, TOKENIZER)
        reference = af.TruncationStrategy(
            max_n=max_n,
            compact_to=compact_to,
            tokenizer=await ViewCounts(view).load(),
            preserve_first_user_group=first,
        )
        await compare(chat, ours, reference, token_mode=True)

    _run(run())


@SETTINGS
@given(chat=chats(aligned=True), keep=st.integers(1, 8), preserve=st.booleans())
def test_sliding_window(chat: Chat, keep: int, preserve: bool) -> None:
    _run(
        compare(
            chat,
            SlidingWindowStrategy(keep_last_groups=keep, preserve_system=preserve),
            af.SlidingWindowStrategy(keep_last_groups=keep, preserve_system=preserve),
            preserve_system=preserve,
        )
    )


@SETTINGS
@given(chat=chats(aligned=True), keep=st.integers(0, 4))
def test_selective_tool_call_compaction(chat: Chat, keep: int) -> None:
    _run(
        compare(
            chat,
            SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep),
            af.SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep),
        )
    )


@SETTINGS
@given(chat=chats(aligned=True), keep=st.integers(0, 4))
def test_tool_result_compaction(chat: Chat, keep: int) -> None:
    _run(
        compare(
            chat,
            ToolResultCompactionStrategy(keep_last_tool_call_groups=keep),
            af.ToolResultCompactionStrategy(keep_last_tool_call_groups=keep),
        )
    )


@settings(max_examples=250, deadline=None)
@given(chat=chats(aligned=True), data=st.data())
def test_token_budget_composed(chat: Chat, data: st.DataObject) -> None:
    budget = data.draw(st.integers(1, 800))
    keep = data.draw(st.integers(0, 3))
    early = data.draw(st.booleans())
    ours = TokenBudgetComposedStrategy(
        token_budget=budget,
        tokenizer=TOKENIZER,
        strategies=[
            ToolResultCompactionStrategy(keep_last_tool_call_groups=keep),
            SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep),
        ],
        early_stop=early,
    )

    async def run() -> None:
        view = View.from_messages(chat.messages, TOKENIZER)
        reference = af.TokenBudgetComposedStrategy(
            token_budget=budget,
            tokenizer=await ViewCounts(view, await every_summary(view)).load(),
            strategies=[
                af.ToolResultCompactionStrategy(keep_last_tool_call_groups=keep),
                af.SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep),
            ],
            early_stop=early,
        )
        await compare(chat, ours, reference, token_mode=True)

    _run(run())


@settings(max_examples=250, deadline=None)
@given(chat=chats(aligned=True), data=st.data())
def test_context_window(chat: Chat, data: st.DataObject) -> None:
    window = data.draw(st.integers(50, 1500))
    kwargs: dict[str, Any] = {
        "max_context_window_tokens": window,
        "max_output_tokens": data.draw(st.integers(0, window // 4)),
        "tool_eviction_threshold": data.draw(st.sampled_from([0.3, 0.5])),
        "truncation_threshold": data.draw(st.sampled_from([0.5, 0.8])),
        "keep_last_tool_call_groups": data.draw(st.integers(0, 4)),
        "preserve_first_user_group": data.draw(st.booleans()),
    }
    ours = ContextWindowCompactionStrategy(**kwargs)

    async def run() -> None:
        view = View.from_messages(chat.messages, TOKENIZER)
        counts = await ViewCounts(view, await every_summary(view)).load()
        reference = af.ContextWindowCompactionStrategy(**kwargs, tokenizer=counts)
        unsaving = await unsaving_collapses(view, ours)
        if unsaving:
            # a deliberate deviation: chatledger does not collapse a group whose summary is
            # no smaller; the reference does, so its eviction phase is given the same rule
            event("deviation: a collapse would not save tokens")
            eviction = SavingOnly(reference._tool_eviction, unsaving)
            reference._tool_eviction = eviction  # type: ignore[assignment]
        await compare(chat, ours, reference, token_mode=True)

    _run(run())


async def unsaving_collapses(view: View, strategy: ContextWindowCompactionStrategy) -> set[str]:
    """The tool-call groups the eviction phase would collapse (as the reference does) whose
    summary counts no fewer tokens than the group: chatledger leaves those alone."""
    if view.token_count <= strategy.tool_eviction_tokens:
        return set()
    eviction = ToolResultCompactionStrategy(
        keep_last_tool_call_groups=strategy.keep_last_tool_call_groups
    )
    return {
        s.replaces[0]
        for s in (await eviction.plan(view)).summaries
        if view.count(s.message) >= view.group(s.replaces[0]).token_count
    }


class SavingOnly:
    """The reference's tool-result eviction, then undone for the ``unsaving`` groups: their
    summary message is removed and their messages are included again, unannotated as
    summarized. This models chatledger's rule on the reference."""

    def __init__(self, eviction: Any, unsaving: set[str]) -> None:
        self.eviction = eviction
        self.unsaving = unsaving

    async def __call__(self, messages: list[Any]) -> bool:
        await self.eviction(messages)
        summary_ids = {f"tool_summary_{g}" for g in self.unsaving}
        undone = {m.message_id for m in messages if m.message_id in summary_ids}
        assert undone == summary_ids, "the reference did not collapse every unsaving group"
        messages[:] = [m for m in messages if m.message_id not in summary_ids]
        for message in messages:
            annotation = message.additional_properties.get(af_compaction.GROUP_ANNOTATION_KEY)
            if annotation is None:
                continue
            if annotation.get(af_compaction.SUMMARIZED_BY_SUMMARY_ID_KEY) in summary_ids:
                annotation.pop(af_compaction.SUMMARIZED_BY_SUMMARY_ID_KEY)
                af_compaction.set_excluded(message, excluded=False)
                message.additional_properties.pop(af_compaction.EXCLUDE_REASON_KEY, None)
        return True


# --- deliberate deviations, each shown on both systems ------------------------------------


async def test_deviation_basis_of_token_counts() -> None:
    """The reference counts each message's JSON serialization (keys, ids and all); the view
    counts what the model sees (texts, call names and arguments, results) plus a framing
    overhead, so two messages that differ only in their ids count the same."""
    short = [Message.text_message("user", "What is the weather in Zürich?", message_id="m")]
    long = [Message.text_message("user", "What is the weather in Zürich?", message_id="m" * 80)]
    ours = [View.from_messages(m, TOKENIZER).token_count for m in (short, long)]
    assert ours[0] == ours[1]
    theirs = []
    for messages in (short, long):
        reference = to_reference(messages)
        af_compaction.annotate_token_counts(reference, tokenizer=af.CharacterEstimatorTokenizer())
        theirs.append(af_compaction.included_token_count(reference))
    assert theirs[1] > theirs[0] > ours[0]


async def test_deviation_orphans_and_stale_calls_are_left_out() -> None:
    """A result without a call, and a call left unanswered before a later user message,
    are not sent (a provider rejects both); the reference sends them."""
    messages = [
        say("user", "u0"),
        results("o", ("nobody", "stray")),
        say("assistant", "a0"),
        calls("c1", "k1"),
        say("user", "u1"),
        say("assistant", "a1"),
    ]
    window = SlidingWindowStrategy(keep_last_groups=100)
    _, sent = await plan_and_project(window, messages)
    assert sent == ["u0", "a0", "u1", "a1"]
    reference = await af.apply_compaction(
        to_reference(messages), strategy=af.SlidingWindowStrategy(keep_last_groups=100)
    )
    assert [m.message_id for m in reference] == ["u0", "o", "a0", "c1", "u1", "a1"]


async def test_deviation_context_window_collapses_only_when_it_saves_tokens() -> None:
    """The reference's tool-result eviction collapses every older tool-call group, also
    one whose summary (``[Tool results: get_weather: result 1]``) counts more than the call
    and result it replaces; chatledger's context window collapses only the groups whose
    summary is strictly smaller (here the one with a 5000-character result)."""
    messages = turns(3, system=False)
    messages[2] = results("r0", ("k0", "x" * 5000))
    view = View.from_messages(messages, TOKENIZER)
    every = await ToolResultCompactionStrategy(keep_last_tool_call_groups=0).plan(view)
    summaries = {s.replaces[0]: s.message for s in every.summaries}
    assert view.count(summaries["group_c0"]) < view.group("group_c0").token_count
    assert view.count(summaries["group_c1"]) >= view.group("group_c1").token_count
    # window 2000: evict above 1000, truncate above 1600; even with both summaries the
    # history stays under 1600, so neither system truncates
    kwargs: dict[str, Any] = {
        "max_context_window_tokens": 2000,
        "max_output_tokens": 0,
        "keep_last_tool_call_groups": 1,
    }
    older = ("group_c0", "group_c1")
    both = ChangeSet(summaries=tuple(SummaryInsert(summaries[g], (g,)) for g in older))
    assert view.token_count > 1000
    assert view.apply(both).token_count <= 1600
    counts = await ViewCounts(view, list(summaries.values())).load()
    theirs = await run_reference(
        Chat(messages), af.ContextWindowCompactionStrategy(**kwargs, tokenizer=counts), counts
    )
    assert theirs.ids == [
        "u0",
        "tool_summary_group_c0",
        "a0",
        "u1",
        "tool_summary_group_c1",
        "a1",
        "u2",
        "c2",
        "r2",
        "a2",
    ]
    _, sent = await plan_and_project(ContextWindowCompactionStrategy(**kwargs), view)
    assert sent == [
        "u0",
        "tool_summary_group_c0",
        "a0",
        "u1",
        "c1",
        "r1",
        "a1",
        "u2",
        "c2",
        "r2",
        "a2",
    ]
