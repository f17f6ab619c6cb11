"""apply_compaction: a strategy on a plain list, in memory, input untouched."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from strategies.apply import apply_compaction
from strategies.base import TokenizerMismatch
from strategies.messages import FunctionResultContent, Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.strategies.gen_b import conversations
from tests.strategies.invariants import assert_projection_invariants


def chat(turns: int) -> list[Message]:
    out = [Message.text_message("system", "be brief", message_id="s")]
    for i in range(1, turns + 1):
        out.append(Message.text_message("user", f"question {i}", message_id=f"u{i}"))
        out.append(Message.text_message("assistant", f"answer {i}", message_id=f"a{i}"))
    return out


async def test_returns_the_projection_and_leaves_the_input_alone() -> None:
    messages = chat(5)
    snapshot = [m.model_dump() for m in messages]
    projected = await apply_compaction(messages, SummarizationStrategy(client=FakeSummarizer()))
    assert [m.model_dump() for m in messages] == snapshot
    assert projected[0].message_id == "s"
    assert projected[1].text.startswith("Summary of 6 messages")
    assert [m.message_id for m in projected[2:]] == ["u4", "a4", "u5", "a5"]


async def test_reference_mutates_its_input_and_this_does_not() -> None:
    af = pytest.importorskip("agent_framework")
    messages = chat(5)
    theirs = [af.Message(role=m.role, contents=[m.text], message_id=m.message_id) for m in messages]
    their_projection = await af.apply_compaction(
        theirs, strategy=af.SummarizationStrategy(client=FakeSummarizer())
    )
    assert len(theirs) == len(messages) + 1  # the reference inserted its summary in the input
    ours = await apply_compaction(messages, SummarizationStrategy(client=FakeSummarizer()))
    assert len(messages) == 11
    assert [m.text for m in ours] == [m.text for m in their_projection]


async def test_no_strategy_projects_as_is_without_orphans() -> None:
    orphan = Message(
        role="tool", contents=[FunctionResultContent(call_id="nobody", result="x")], message_id="o"
    )
    messages = [*chat(1), orphan]
    assert await apply_compaction(messages, None) == messages[:-1]


async def test_uses_the_strategy_tokenizer_when_none_is_given() -> None:
    tokenizer = TiktokenTokenizer()
    strategy = TruncationStrategy(max_n=10, compact_to=5, tokenizer=tokenizer)
    projected = await apply_compaction(chat(8), strategy)  # no mismatch: its tokenizer is used
    view = View.from_messages(chat(8), tokenizer)
    assert projected == await view.apply(await strategy.plan(view)).project()
    assert len(projected) < len(chat(8))
    with pytest.raises(TokenizerMismatch):
        await apply_compaction(chat(8), strategy, tokenizer=CharacterEstimatorTokenizer())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(max_steps=12))
async def test_generated_inputs_are_never_mutated(messages: list[Message]) -> None:
    snapshot = [m.model_copy(deep=True) for m in messages]
    copy = list(messages)
    strategy = SummarizationStrategy(client=FakeSummarizer(), target_count=2, threshold=0)
    projected = await apply_compaction(messages, strategy)
    assert messages == copy == snapshot
    expected_view = View.from_messages(messages)
    expected = await expected_view.apply(await strategy.plan(expected_view)).project()
    assert projected == expected
    assert_projection_invariants(projected, nonempty=bool(await expected_view.project()))
