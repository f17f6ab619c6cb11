"""Property tests: the invariants (docs/architecture.md) of every strategy, generated chats.

Conversations have parallel calls, orphan results, pending and stale calls, reasoning,
huge results, non-ASCII text and pinned groups; every strategy is drawn with random
parameters, in message-count and token mode, alone and composed under a token budget.
Each plan must keep the invariants (see ``invariants.py``), be deterministic and
idempotent, never touch a pinned group and never mutate the view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from strategies.base import CompactionStrategy
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.groups import result_ids
from strategies.messages import Message
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.token_budget import TokenBudgetComposedStrategy
from strategies.tokenizers import CharacterEstimatorTokenizer, Tokenizer
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.triggers import GroupsExceed, MessagesExceed, TokensBelow, TokensExceed
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.groups.conversations import conversations as adversarial_conversations
from tests.strategies.conversations import chats
from tests.strategies.invariants import assert_invariants, assert_projection_invariants

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKENIZER = CharacterEstimatorTokenizer()


def _truncation(draw: Any) -> CompactionStrategy:
    max_n = draw(st.integers(1, 400))
    return TruncationStrategy(
        max_n=max_n,
        compact_to=draw(st.integers(1, max_n)),
        tokenizer=draw(st.sampled_from([None, TOKENIZER])),
        preserve_system=draw(st.booleans()),
        preserve_first_user_group=draw(st.booleans()),
    )


def _sliding(draw: Any) -> CompactionStrategy:
    size = draw(st.integers(1, 6))
    window = {"keep_last_groups": size} if draw(st.booleans()) else {"keep_last_turns": size}
    return SlidingWindowStrategy(**window, preserve_system=draw(st.booleans()))


def _selective(draw: Any) -> CompactionStrategy:
    return SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=draw(st.integers(0, 3)))


def _tool_groups(draw: Any) -> CompactionStrategy:
    keep = draw(st.integers(0, 3))
    if draw(st.booleans()):
        return SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=keep)
    return ToolResultCompactionStrategy(keep_last_tool_call_groups=keep)


def _context_window(draw: Any) -> CompactionStrategy:
    window = draw(st.integers(20, 3000))
    output = draw(st.integers(0, window // 4))
    eviction = draw(st.sampled_from([0.25, 0.5, 0.7]))
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=window,
        max_output_tokens=output,
        tool_eviction_threshold=eviction,
        truncation_threshold=draw(st.sampled_from([eviction, 0.8, 1.0])),
        keep_last_tool_call_groups=draw(st.integers(0, 4)),
        preserve_first_user_group=draw(st.booleans()),
        reserved_tokens=draw(st.integers(0, 5)),
        start_at_user=draw(st.booleans()),
    )


def _triggered(draw: Any) -> CompactionStrategy:
    trigger = draw(
        st.sampled_from([TokensExceed(80), MessagesExceed(6), GroupsExceed(4), TokensExceed(0)])
    )
    target = draw(st.sampled_from([None, TokensBelow(60)]))
    kind = draw(st.sampled_from(["truncation", "sliding", "selective", "tool_result"]))
    if kind == "truncation":
        return TruncationStrategy(max_n=10, compact_to=5, trigger=trigger, target=target)
    if kind == "sliding":
        return SlidingWindowStrategy(keep_last_groups=2, trigger=trigger, target=target)
    if kind == "selective":
        return SelectiveToolCallCompactionStrategy(trigger=trigger, target=target)
    return ToolResultCompactionStrategy(trigger=trigger, target=target)


_SIMPLE = [_truncation, _sliding, _tool_groups, _context_window, _triggered]


@st.composite
def any_strategy(draw: Any) -> CompactionStrategy:
    """One strategy with random parameters, or a token budget composing a few."""
    if draw(st.integers(0, 4)) > 0:
        return draw(st.sampled_from(_SIMPLE))(draw)  # type: ignore[no-any-return]
    inner = [draw(st.sampled_from(_SIMPLE))(draw) for _ in range(draw(st.integers(0, 3)))]
    return TokenBudgetComposedStrategy(
        token_budget=draw(st.integers(0, 300)),
        tokenizer=TOKENIZER,
        strategies=inner,
        early_stop=draw(st.booleans()),
        exclude_system_on_fallback=draw(st.booleans()),
    )


def _system_may_go(strategy: CompactionStrategy) -> bool:
    if isinstance(strategy, TruncationStrategy | SlidingWindowStrategy):
        return not strategy.preserve_system
    if isinstance(strategy, TokenBudgetComposedStrategy):
        return strategy.exclude_system_on_fallback or any(
            _system_may_go(s) for s in strategy.strategies
        )
    return False


async def _unpaired_before(view: View) -> bool:
    """Whether the history, before any strategy, sends a result without its call, or has a
    non-tool group carrying a result (an assistant message answering a call it is not
    grouped with): no strategy can keep such a projection paired."""
    try:
        assert_projection_invariants(await view.project(), nonempty=False)
    except AssertionError:
        return True
    loaded = await view.messages()
    return any(
        result_ids(m) for g in view.groups if g.kind != "tool_call" for m in loaded[g.group_id]
    )


async def _check(messages: list[Message], pinned: list[str], strategy: CompactionStrategy) -> None:
    tokenizer: Tokenizer = TOKENIZER
    view = View.from_messages(messages, tokenizer, pinned=pinned)
    if await _unpaired_before(view):
        reject()  # the annotation's and projection's concern (reported), not the strategies'
    groups_before = view.groups
    changes = await strategy.plan(view)
    assert view.groups == groups_before, "the strategy mutated the view"
    await assert_invariants(
        view, changes, strategy=strategy, system_may_go=_system_may_go(strategy)
    )


@SETTINGS
@given(chat=chats(), strategy=any_strategy())
def test_invariants_hold_on_generated_chats(chat: Any, strategy: CompactionStrategy) -> None:
    asyncio.run(_check(chat.messages, chat.pinned_groups, strategy))


@SETTINGS
@given(messages=adversarial_conversations(), strategy=any_strategy(), data=st.data())
def test_invariants_hold_on_adversarial_conversations(
    messages: list[Message], strategy: CompactionStrategy, data: st.DataObject
) -> None:
    group_ids = [f"group_{m.message_id}" for m in messages]
    pinned = data.draw(st.lists(st.sampled_from(group_ids), max_size=2)) if group_ids else []
    asyncio.run(_check(messages, pinned, strategy))


@settings(max_examples=60, deadline=None)
@given(chat=chats(), strategy=any_strategy())
def test_pinned_groups_are_never_removed(chat: Any, strategy: CompactionStrategy) -> None:
    every = [f"group_{m.message_id}" for m in chat.messages]

    async def run() -> None:
        view = View.from_messages(chat.messages, TOKENIZER, pinned=every)
        changes = await strategy.plan(view)
        assert changes.touched_group_ids.isdisjoint(g.group_id for g in view.groups if g.pinned)

    asyncio.run(run())


class NoLoading:
    """A message source that fails: exclusion strategies must decide from counts alone."""

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        raise AssertionError(f"loaded messages of {list(group_ids)}")


@settings(max_examples=60, deadline=None)
@given(chat=chats(), data=st.data())
def test_exclusion_strategies_never_load_messages(chat: Any, data: st.DataObject) -> None:
    maker = data.draw(st.sampled_from([_truncation, _sliding, _selective]))
    strategy = maker(data.draw)
    counted = View.from_messages(chat.messages, TOKENIZER, pinned=chat.pinned_groups)
    view = View(groups=counted.groups, source=NoLoading(), tokenizer=TOKENIZER)
    asyncio.run(strategy.plan(view))
