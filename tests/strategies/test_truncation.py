"""TruncationStrategy: oldest-first exclusion of whole groups, by messages or tokens."""

from __future__ import annotations

import logging

import agent_framework as af
import pytest

from strategies.base import TokenizerMismatch
from strategies.messages import Message
from strategies.tokenizers import CountingTokenizer, TokenCountPolicy
from strategies.triggers import GroupsExceed
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.strategies.conversations import (
    calls,
    plan_and_project,
    results,
    say,
    to_reference,
    turns,
)


class Chars:
    """One token per character (a test tokenizer)."""

    name = "chars"

    def count_tokens(self, text: str) -> int:
        return len(text)


NO_OVERHEAD = TokenCountPolicy(per_message_overhead=0)


def excluded(changes: object) -> list[str]:
    return [e.group_id for e in changes.exclusions]  # type: ignore[attr-defined]


async def test_below_max_n_changes_nothing() -> None:
    changes, _ = await plan_and_project(TruncationStrategy(max_n=13, compact_to=5), turns(3))
    assert changes.is_empty  # 13 messages, not above 13


async def test_excludes_oldest_groups_down_to_compact_to() -> None:
    # 13 messages; u0 (1), c0+r0 (2), a0 (1), u1 (1) bring it to 8
    changes, sent = await plan_and_project(TruncationStrategy(max_n=10, compact_to=8), turns(3))
    assert excluded(changes) == ["group_u0", "group_c0", "group_a0", "group_u1"]
    assert {e.reason for e in changes.exclusions} == {"truncation"}
    assert sent == ["s", "c1", "r1", "a1", "u2", "c2", "r2", "a2"]
    assert changes.strategy == "TruncationStrategy"


async def test_system_kept_unless_told() -> None:
    strategy = TruncationStrategy(max_n=2, compact_to=1, preserve_system=False)
    _, sent = await plan_and_project(strategy, turns(2, tools=False), system_may_go=True)
    assert sent == ["u1", "a1"]
    _, sent = await plan_and_project(
        TruncationStrategy(max_n=2, compact_to=1), turns(2, tools=False)
    )
    assert sent == ["s", "u1", "a1"]


async def test_preserve_first_user_group() -> None:
    strategy = TruncationStrategy(max_n=4, compact_to=4, preserve_first_user_group=True)
    _, sent = await plan_and_project(strategy, turns(3, tools=False))
    assert sent == ["s", "u0", "u2", "a2"]


def _long_last_turn() -> list[Message]:
    return [
        say("system", "s"),
        say("user", "u0", "what is the weather?"),
        calls("c0", "k0"),
        results("r0", ("k0", "sunny")),
        calls("c1", "k1"),
        results("r1", ("k1", "18°C")),
        say("assistant", "a0"),
    ]


async def test_newest_user_request_is_kept_where_the_reference_drops_it() -> None:
    messages = _long_last_turn()
    reference = await af.apply_compaction(
        to_reference(messages), strategy=af.TruncationStrategy(max_n=3, compact_to=2)
    )
    assert [m.message_id for m in reference] == ["s", "a0"]  # the question is gone
    _, sent = await plan_and_project(TruncationStrategy(max_n=3, compact_to=2), messages)
    assert sent == ["s", "u0", "a0"]


async def test_pinned_groups_stay() -> None:
    strategy = TruncationStrategy(max_n=10, compact_to=8)
    changes, _ = await plan_and_project(strategy, turns(3), pinned=("group_u0", "group_c0"))
    assert excluded(changes) == ["group_a0", "group_u1", "group_c1", "group_a1"]


async def test_warns_when_pinned_groups_alone_exceed(caplog: pytest.LogCaptureFixture) -> None:
    messages = turns(2)
    every = tuple(f"group_{m.message_id}" for m in messages)
    with caplog.at_level(logging.WARNING, logger="chatledger.strategies"):
        changes, _ = await plan_and_project(
            TruncationStrategy(max_n=2, compact_to=1), messages, pinned=every
        )
    assert changes.is_empty
    assert "could not reach its target" in caplog.text
    assert "pinned" in caplog.text


async def test_token_mode_reads_the_views_counts() -> None:
    messages = [
        say("system", "s", "x" * 10),
        say("user", "u0", "x" * 100),
        say("assistant", "a0", "x" * 100),
        say("user", "u1", "x" * 10),
        say("assistant", "a1", "x" * 10),
    ]
    view = View.from_messages(messages, Chars(), policy=NO_OVERHEAD)
    assert view.token_count == 230
    counting = CountingTokenizer(Chars())
    strategy = TruncationStrategy(max_n=200, compact_to=50, tokenizer=counting)
    changes, sent = await plan_and_project(strategy, view)
    assert excluded(changes) == ["group_u0", "group_a0"]  # 230 -> 130 -> 30
    assert sent == ["s", "u1", "a1"]
    assert counting.calls == 0
    by_messages = TruncationStrategy(max_n=200, compact_to=50)
    assert (await by_messages.plan(view)).is_empty  # 5 messages


async def test_tokenizer_other_than_the_views_is_an_error() -> None:
    view = View.from_messages(turns(1))
    strategy = TruncationStrategy(max_n=1, compact_to=1, tokenizer=Chars())
    with pytest.raises(TokenizerMismatch, match=r"'chars'.*'character_estimator'"):
        await strategy.plan(view)


async def test_trigger_and_default_target() -> None:
    strategy = TruncationStrategy(max_n=100, compact_to=100, trigger=GroupsExceed(8))
    changes, _ = await plan_and_project(strategy, turns(3))  # 10 groups
    assert excluded(changes) == ["group_u0", "group_c0"]


@pytest.mark.parametrize(
    ("max_n", "compact_to"), [(0, 1), (5, 0), (5, 6)], ids=["max_n", "compact_to", "order"]
)
def test_invalid_parameters(max_n: int, compact_to: int) -> None:
    with pytest.raises(ValueError):
        TruncationStrategy(max_n=max_n, compact_to=compact_to)


def test_params_are_json() -> None:
    strategy = TruncationStrategy(max_n=5, compact_to=3, tokenizer=Chars(), trigger=GroupsExceed(2))
    assert strategy.params() == {
        "max_n": 5,
        "compact_to": 3,
        "tokenizer": "chars",
        "preserve_system": True,
        "preserve_first_user_group": False,
        "trigger": {"trigger": "GroupsExceed", "n": 2},
        "target": None,
    }
