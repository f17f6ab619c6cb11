"""ContextWindowCompactionStrategy's ``min_saving_tokens`` and ``eviction_headroom``.

Counts: one token per character, no framing overhead (as in ``test_context_window.py``).
A tool-call group counts ``get_weather`` (11) plus its result; its summary
``[Tool results: get_weather: ...]`` is capped at 4096 characters, so only a result
longer than 4085 characters makes a summary that saves tokens.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.changeset import ChangeSet
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy
from strategies.view import View
from tests.strategies.conversations import Chat, chats, plan_and_project, results, say, turns
from tests.strategies.invariants import assert_invariants

NO_OVERHEAD = TokenCountPolicy(per_message_overhead=0)


class Chars:
    """One token per character."""

    name = "chars"

    def count_tokens(self, text: str) -> int:
        return len(text)


def view_of(messages: list[Message], *, pinned: tuple[str, ...] = ()) -> View:
    return View.from_messages(messages, Chars(), policy=NO_OVERHEAD, pinned=pinned)


def window(budget: int, *, keep: int = 1, **kwargs: object) -> ContextWindowCompactionStrategy:
    """A strategy whose input budget is ``budget`` (output 990 tokens, reserve 10)."""
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=budget + 1000,
        max_output_tokens=990,
        reserved_tokens=10,
        keep_last_tool_call_groups=keep,
        **kwargs,  # type: ignore[arg-type]
    )


def with_results(count: int, sizes: dict[int, int]) -> list[Message]:
    """``turns(count)`` with the result of turn ``i`` made of ``sizes[i]`` characters."""
    messages = turns(count)
    for i, size in sizes.items():
        index = next(n for n, m in enumerate(messages) if m.message_id == f"r{i}")
        messages[index] = results(f"r{i}", (f"k{i}", "x" * size))
    return messages


def saved(view: View, changes: ChangeSet) -> int:
    """Tokens ``changes`` saves on ``view``."""
    return view.token_count - view.apply(changes).token_count


# --------------------------------------------------------------------------- min_saving_tokens


async def test_a_change_set_saving_less_than_the_minimum_is_not_applied() -> None:
    # 4202 tokens; budget 8000: evict above 4000; collapsing c0 (4101 tokens) into its
    # 4096-token summary saves 5
    view = view_of(with_results(3, {0: 4090}))
    plain, _ = await plan_and_project(window(8000), view)
    assert [s.replaces for s in plain.summaries] == [("group_c0",)]
    assert saved(view, plain) == 5
    enough, _ = await plan_and_project(window(8000, min_saving_tokens=5), view)
    assert enough.summaries == plain.summaries
    too_small, sent = await plan_and_project(window(8000, min_saving_tokens=6), view)
    assert too_small.is_empty
    assert sent == [m.message_id for m in with_results(3, {0: 4090})]


async def test_the_minimum_weighs_the_whole_change_set() -> None:
    # budget 4200: the summary of c0 is excluded by the truncation, which saves far more
    view = view_of(with_results(3, {0: 5000}))
    plain, _ = await plan_and_project(window(4200), view)
    changes, _ = await plan_and_project(window(4200, min_saving_tokens=4000), view)
    assert changes.exclusions == plain.exclusions and saved(view, changes) >= 4000


def _mostly_pinned(big: int) -> tuple[list[Message], tuple[str, ...]]:
    """A pinned request of ``big`` characters, a short tool-call group (whose summary
    would not save), a pinned answer, then the newest request."""
    messages = [
        say("system", "s"),
        say("user", "u0", "x" * big),
        *turns(1, system=False)[1:3],
        say("assistant", "a0"),
        say("user", "u1"),
    ]
    return messages, ("group_u0", "group_a0")


async def test_a_small_saving_is_dropped_when_the_context_fits_the_budget() -> None:
    messages, pinned = _mostly_pinned(5000)
    view = view_of(messages, pinned=pinned)
    assert 4800 < view.token_count <= 6000  # above truncation, within the budget
    plain, _ = await plan_and_project(window(6000), view)
    assert [e.group_id for e in plain.exclusions] == ["group_c0"]
    changes, _ = await plan_and_project(window(6000, min_saving_tokens=100), view)
    assert changes.is_empty


async def test_a_small_saving_is_applied_when_the_context_is_over_the_budget() -> None:
    messages, pinned = _mostly_pinned(5000)
    view = view_of(messages, pinned=pinned)
    assert view.token_count > 4000
    changes, _ = await plan_and_project(window(4000, min_saving_tokens=100), view)
    assert [e.group_id for e in changes.exclusions] == ["group_c0"]
    assert saved(view, changes) < 100


async def test_start_at_user_is_applied_whatever_the_minimum() -> None:
    messages = [say("system", "s"), say("assistant", "hello"), say("user", "u0")]
    strategy = window(500, start_at_user=True, min_saving_tokens=1000)
    _, sent = await plan_and_project(strategy, view_of(messages))
    assert sent == ["s", "u0"]


# --------------------------------------------------------------------------- eviction_headroom


def _five_turns() -> View:
    # groups c0..c4 of about 20,000 tokens (c2 40,000), whose summaries count 4096
    return view_of(with_results(5, {0: 20000, 1: 20000, 2: 40000, 3: 20000, 4: 20000}))


def _collapsed(changes: ChangeSet) -> list[str]:
    return [g for s in changes.summaries for g in s.replaces]


async def test_headroom_evicts_further_than_without_it() -> None:
    view = _five_turns()
    # budget 120,000: evict above 60,000, truncate above 96,000; keeping the newest three
    # tool-call groups, eviction collapses c0 and c1 and leaves about 88,000 tokens
    plain, _ = await plan_and_project(window(120_000, keep=3), view)
    assert _collapsed(plain) == ["group_c0", "group_c1"]
    assert view.apply(plain).token_count > 60_000
    # headroom 0.05: on to 54,000 tokens; collapsing c2 is enough
    strategy = window(120_000, keep=3, eviction_headroom=0.05)
    assert strategy.eviction_target_tokens == 54_000
    changes, _ = await plan_and_project(strategy, view)
    assert _collapsed(changes) == ["group_c0", "group_c1", "group_c2"]
    assert view.apply(changes).token_count <= 54_000
    # headroom 0.1: on to 48,000 tokens; c3 goes too
    changes, _ = await plan_and_project(window(120_000, keep=3, eviction_headroom=0.1), view)
    assert _collapsed(changes) == ["group_c0", "group_c1", "group_c2", "group_c3"]


async def test_headroom_never_collapses_the_current_turn() -> None:
    # headroom as large as the threshold (target 0 tokens): c4, after the newest
    # request, stays, as the in-flight tail and pinned groups would
    view = _five_turns()
    strategy = window(120_000, keep=3, eviction_headroom=0.5)
    assert strategy.eviction_target_tokens == 0
    changes, sent = await plan_and_project(strategy, view)
    assert "group_c4" not in _collapsed(changes)
    assert {"c4", "r4"} <= set(sent)


async def test_headroom_does_nothing_below_the_eviction_threshold() -> None:
    view = _five_turns()
    changes, _ = await plan_and_project(window(250_000, keep=3, eviction_headroom=0.4), view)
    assert changes.is_empty


def test_the_options_are_in_params_and_checked() -> None:
    strategy = window(1000, min_saving_tokens=64, eviction_headroom=0.25)
    assert strategy.params()["min_saving_tokens"] == 64
    assert strategy.params()["eviction_headroom"] == 0.25
    defaults = window(1000).params()
    assert (defaults["min_saving_tokens"], defaults["eviction_headroom"]) == (0, 0.0)
    with pytest.raises(ValueError, match="min_saving_tokens"):
        window(1000, min_saving_tokens=-1)
    with pytest.raises(ValueError, match="eviction_headroom"):
        window(1000, eviction_headroom=-0.1)
    with pytest.raises(ValueError, match="eviction_headroom"):
        window(1000, eviction_headroom=0.6)  # more than the eviction threshold (0.5)


@settings(max_examples=200, deadline=None)
@given(chat=chats(), data=st.data())
def test_the_options_keep_the_invariants(chat: Chat, data: st.DataObject) -> None:
    view = View.from_messages(chat.messages, pinned=chat.pinned_groups)
    # an input budget of one to three times the context: eviction fires on most chats
    budget = max(20, int(view.token_count * data.draw(st.floats(1.0, 3.0))))
    output = data.draw(st.integers(0, budget // 4))
    eviction = data.draw(st.sampled_from([0.25, 0.5, 0.7]))
    kwargs = {
        "max_context_window_tokens": budget + output,
        "max_output_tokens": output,
        "tool_eviction_threshold": eviction,
        "keep_last_tool_call_groups": data.draw(st.integers(0, 3)),
        "preserve_first_user_group": data.draw(st.booleans()),
        "start_at_user": data.draw(st.booleans()),
    }
    minimum = data.draw(st.integers(0, max(1, view.token_count // 2)))
    headroom = data.draw(st.floats(0.0, eviction))
    strategy = ContextWindowCompactionStrategy(
        **kwargs,  # type: ignore[arg-type]
        min_saving_tokens=minimum,
        eviction_headroom=headroom,
    )
    plain = ContextWindowCompactionStrategy(**kwargs)  # type: ignore[arg-type]

    async def run() -> None:
        changes = await strategy.plan(view)
        await assert_invariants(view, changes, strategy=strategy)
        compaction = [e for e in changes.exclusions if e.reason != "start_at_user"]
        if compaction or changes.summaries:
            over = view.token_count > strategy.input_budget_tokens
            assert over or saved(view, changes) >= minimum
        for insert in changes.summaries:
            replaced = sum(view.group(g).token_count for g in insert.replaces)
            assert view.count(insert.message) < replaced
        newest = view.last_user_index() or 0
        current = {g.group_id for g in view.groups[newest:]}
        touched_by_plain = (await plain.plan(view)).touched_group_ids
        assert set(_collapsed(changes)) & current <= touched_by_plain

    asyncio.run(run())


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(10, 30_000), min_size=1, max_size=6),
    keep=st.integers(0, 3),
    scale=st.floats(0.8, 2.5),
    headroom=st.floats(0.0, 0.5),
)
def test_headroom_collapses_at_least_what_eviction_does(
    sizes: list[int], keep: int, scale: float, headroom: float
) -> None:
    view = view_of(with_results(len(sizes), dict(enumerate(sizes))))
    budget = int(view.token_count * scale)
    plain = window(budget, keep=keep)
    further = window(budget, keep=keep, eviction_headroom=headroom)

    async def run() -> None:
        without, _ = await plan_and_project(plain, view)
        changes, _ = await plan_and_project(further, view)
        removed = set(_collapsed(changes)) | {e.group_id for e in changes.exclusions}
        assert set(_collapsed(without)) <= removed
        newest = view.last_user_index() or 0
        current_turn = {g.group_id for g in view.groups[newest:]}
        extra = set(_collapsed(changes)) - set(_collapsed(without))
        assert not extra & current_turn

    asyncio.run(run())
