"""A pipeline settles: planning it again on the view it leaves changes nothing.

One pass over the steps is not always a fixed point: a later step can undo the
condition an earlier one planned on. Two cases found by the stateful test:

* truncation keeps the first user group (``preserve_first_user_group=True``) but is
  still above its bound; summarization, which does not protect that group, replaces it
  by a summary; run again, truncation sees an unprotected summary above its bound and
  excludes it;
* a summary counts more tokens than the short groups it replaces, so an earlier token
  bound (the context window's) fires again and excludes it.

The pipeline therefore repeats its passes until one changes nothing (deviation 10 in
docs/strategies.md); the reference runs its steps once, and churns the same way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import agent_framework as af
import pytest
from agent_framework import _compaction as af_compaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.memory import InMemoryHistoryStore
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import Message
from strategies.pipeline import MAX_PASSES, PipelineStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.summarization import DEFAULT_SUMMARY_PROMPT, SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.triggers import GroupsExceed, Never
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.strategies.conversations import calls, say, to_reference
from tests.strategies.gen_b import views
from tests.strategies.invariants import assert_invariants

TOKENIZER = CharacterEstimatorTokenizer()


def protected_first_user() -> tuple[list[Message], list[CompactionStrategy]]:
    """Truncation keeps u0 (first user), u1 (the request) and the in-flight calls c1, c2:
    still above ``max_n``; summarization then replaces u0 by a summary."""
    messages = [say("user", "u0"), say("assistant", "a0"), say("user", "u1")]
    messages += [calls("c1", "k1"), calls("c2", "k2")]
    return messages, [
        TruncationStrategy(max_n=3, compact_to=2, preserve_first_user_group=True),
        SummarizationStrategy(client=FakeSummarizer(), target_count=2, threshold=1),
    ]


def growing_summary() -> tuple[list[Message], list[CompactionStrategy]]:
    """Six 5-token requests (30 tokens, under the window's truncation threshold of 32);
    the summary of the oldest counts 10 tokens, which takes the view to 35."""
    messages = [say("user", f"u{i}", "hi") for i in range(6)]
    return messages, [
        ContextWindowCompactionStrategy(max_context_window_tokens=40, max_output_tokens=0),
        SummarizationStrategy(client=FakeSummarizer(), target_count=5, threshold=0),
    ]


async def single_pass(view: View, parts: list[CompactionStrategy]) -> View:
    """The reference's pipeline: each step once, on the view the previous ones left."""
    for part in parts:
        view = view.apply(await part.plan(view))
    return view


@pytest.mark.parametrize("case", [protected_first_user, growing_summary])
async def test_one_pass_churns_and_the_pipeline_settles(case: Any) -> None:
    messages, parts = case()
    view = View.from_messages(messages)

    # the situation under test: one pass writes a summary that the next pass excludes.
    once = await single_pass(view, parts)
    summary = next(g for g in once.groups if g.kind == "summary")
    twice = await single_pass(once, parts)
    assert summary.group_id not in {g.group_id for g in twice.groups}
    assert (await single_pass(twice, parts)).groups == twice.groups

    pipeline = PipelineStrategy(*parts)
    changes = await pipeline.plan(view)
    summarizer = parts[1]
    assert isinstance(summarizer, SummarizationStrategy)
    assert isinstance(summarizer.client, FakeSummarizer)
    assert len(summarizer.client.calls) == 2  # once in the single passes, once here
    after = await assert_invariants(view, changes, strategy=pipeline)  # idempotent
    # the settled result is where running single passes ends, in one change set that
    # never writes the summary it drops (its groups are excluded with the later reason).
    assert await after.project() == await twice.project()
    assert changes.summaries == ()
    assert len({e.reason for e in changes.exclusions}) == 1
    assert "summarized" not in {e.reason for e in changes.exclusions}


async def test_the_store_compacts_once_and_then_changes_nothing() -> None:
    messages, parts = protected_first_user()
    store = InMemoryHistoryStore(tokenizer=TOKENIZER)
    await store.append("s", messages)
    pipeline = PipelineStrategy(*parts)

    event = await store.compact("s", pipeline, phase="after_run")
    assert event is not None and event.summarized == {}
    assert set(event.excluded) == {"group_u0", "group_a0"}
    assert await store.compact("s", pipeline, phase="after_run") is None
    assert [m.message_id for m in await store.history("s")] == ["u1", "c1", "c2"]
    stored = await store.history("s", include_excluded=True)
    assert [m.message_id for m in stored] == ["u0", "a0", "u1", "c1", "c2"]  # no summary


class ReferencePipeline:
    """The reference's steps, each run once, in order, on the same messages."""

    def __init__(self, *steps: Any) -> None:
        self.steps = steps

    async def __call__(self, messages: list[Any]) -> bool:
        changed = False
        for step in self.steps:
            af_compaction.annotate_message_groups(messages)
            changed = await step(messages) or changed
        return changed


async def test_deviation_pipeline_settles_where_the_reference_churns() -> None:
    """Agent Framework runs each step once (its .NET ``PipelineStrategy``; in Python, the
    steps of a composed strategy): the first run writes a summary, the second excludes
    it. A system prompt, the first request and the newest message, all protected by the
    reference's truncation, keep it above ``max_n``."""
    messages = [say("system", "s"), say("user", "u0"), say("assistant", "a0")]
    messages += [say("user", "u1"), say("assistant", "a1")]

    client: Any = FakeSummarizer()  # it also answers get_response, as a chat client
    reference_pipeline = ReferencePipeline(
        af.TruncationStrategy(max_n=2, compact_to=1, preserve_first_user_group=True),
        af.SummarizationStrategy(client=client, target_count=1, threshold=0),
    )

    history = to_reference(messages)
    first = await af.apply_compaction(history, strategy=reference_pipeline)
    summary_id = next(str(m.message_id) for m in first if str(m.message_id).startswith("summary"))
    second = await af.apply_compaction(history, strategy=reference_pipeline)
    assert summary_id not in [str(m.message_id) for m in second]  # written, then excluded

    pipeline = PipelineStrategy(
        TruncationStrategy(max_n=2, compact_to=1, preserve_first_user_group=True),
        SummarizationStrategy(client=FakeSummarizer(), target_count=1, threshold=0),
    )
    view = View.from_messages(messages)
    changes = await pipeline.plan(view)
    assert changes.summaries == ()  # the summary the next run would drop is not written
    after = view.apply(changes)
    assert (await pipeline.plan(after)).is_empty
    # (u1 stays: the newest request is protected here, deviation 1.)
    assert [m.message_id for m in await after.project()] == ["s", "u1", "a1"]


class DropOldest:
    """Not a proper strategy: it excludes the oldest group every time it is planned."""

    name = "DropOldest"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        return await SlidingWindowStrategy(keep_last_groups=len(view.groups) - 1).plan(view)


async def test_passes_are_bounded_and_a_pipeline_that_never_settles_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages, _ = growing_summary()
    view = View.from_messages(messages)
    with caplog.at_level(logging.WARNING, logger="chatledger.strategies"):
        changes = await PipelineStrategy(DropOldest()).plan(view)
    assert len(changes.exclusions) == MAX_PASSES
    assert "did not settle" in caplog.text


async def test_a_trigger_gates_every_pass() -> None:
    """Each pass is what planning the pipeline on the current view would do: once the
    pipeline's trigger no longer fires, no further pass runs."""
    messages, parts = protected_first_user()
    view = View.from_messages(messages)
    # 5 groups, 4 after the first pass; every step runs in a pass (the target never holds).
    gated = PipelineStrategy(*parts, trigger=GroupsExceed(4), target=Never)
    changes = await gated.plan(view)
    assert len(changes.summaries) == 1  # the second pass would exclude it: not run
    assert (await gated.plan(view.apply(changes))).is_empty


# ---------------------------------------------------------------- random pipelines


@st.composite
def bounded(draw: Any) -> CompactionStrategy:
    """A step with a bound that a later summary can break."""
    if draw(st.booleans()):
        max_n = draw(st.integers(1, 8))
        return TruncationStrategy(
            max_n=max_n,
            compact_to=draw(st.integers(1, max_n)),
            preserve_first_user_group=draw(st.booleans()),
        )
    window = draw(st.integers(20, 200))
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=window,
        max_output_tokens=draw(st.integers(0, window // 4)),
        keep_last_tool_call_groups=draw(st.integers(0, 3)),
        preserve_first_user_group=draw(st.booleans()),
    )


summarizing = st.builds(
    lambda n, t: SummarizationStrategy(client=FakeSummarizer(), target_count=n, threshold=t),
    st.integers(1, 4),
    st.integers(0, 3),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    view=views(max_steps=16),
    first=st.tuples(bounded(), summarizing),
    more=st.lists(st.one_of(bounded(), summarizing), max_size=2),
)
def test_random_pipelines_are_idempotent(
    view: View, first: tuple[CompactionStrategy, CompactionStrategy], more: list[CompactionStrategy]
) -> None:
    async def check() -> None:
        pipeline = PipelineStrategy(*first, *more)
        await assert_invariants(view, await pipeline.plan(view), strategy=pipeline)

    asyncio.run(check())


async def test_a_failing_summarizer_is_not_called_again_in_the_same_compaction() -> None:
    """A step is not planned again on a view it left unchanged: after truncation's pass,
    the confirming pass does not ask the failing summarizer a second time."""
    messages, _ = protected_first_user()
    failing = FakeSummarizer(fail="error")
    truncation = TruncationStrategy(max_n=3, compact_to=2, preserve_first_user_group=True)
    summarization = SummarizationStrategy(client=failing, target_count=2, threshold=1)
    changes = await PipelineStrategy(truncation, summarization).plan(View.from_messages(messages))
    assert [e.group_id for e in changes.exclusions] == ["group_a0"]
    assert len(failing.calls) == 1 and summarization.consecutive_failures == 1


async def test_a_summary_stopped_by_its_input_bound_goes_on_in_the_next_pass() -> None:
    messages = [say("user", f"u{i}", "word " * 20) for i in range(8)]
    view = View.from_messages(messages)
    prompt = view.tokenizer.count_tokens(DEFAULT_SUMMARY_PROMPT)
    fake = FakeSummarizer()
    bounded = SummarizationStrategy(  # room for three of the requests at a time
        client=fake, target_count=1, threshold=0, max_summary_input_tokens=prompt + 3 * 30
    )
    alone = await bounded.plan(view)
    assert len(fake.calls) == 1 and not (await bounded.plan(view.apply(alone))).is_empty
    fake.calls.clear()

    changes = await PipelineStrategy(bounded).plan(view)
    assert len(fake.calls) == len(changes.summaries) == MAX_PASSES
    # each summary takes in the previous one: the newest replaces the first.
    assert changes.summaries[0].group_id in changes.summaries[1].replaces
