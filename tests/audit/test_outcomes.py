"""Every compaction outcome that matters is an audit row, the same on every backend.

A summarizer that raises or returns nothing is ``failed``; pinned groups alone above the
budget are ``blocked``; a conflict provoked twice is ``abandoned``. A run that changes
nothing writes no row, a dry run never writes, and only ``applied`` events restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from strategies import (
    ContextWindowCompactionStrategy,
    PipelineStrategy,
    SummarizationStrategy,
    TokenBudgetComposedStrategy,
    TruncationStrategy,
)
from strategies.changeset import ChangeSet, Exclusion
from strategies.messages import Message
from strategies.summarizers import FakeSummarizer, FakeSummarizerError, OpenAICompatibleSummarizer
from strategies.view import View
from tests.audit.conftest import TOKENIZER

SESSION = "s"


def _turns(count: int, words: int = 20) -> list[Message]:
    out: list[Message] = []
    for index in range(count):
        out.append(Message.text_message("user", f"question {index} " + "word " * words))
        out.append(Message.text_message("assistant", f"answer {index} " + "text " * words))
    return out


def _summarization(summarizer: Any) -> SummarizationStrategy:
    return SummarizationStrategy(client=summarizer, target_count=2, threshold=0)


async def test_a_summarizer_that_raises_is_a_failed_event(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(4))
    before = await any_store.stats(SESSION)
    event = await any_store.compact(SESSION, _summarization(FakeSummarizer(fail="error")))
    assert event is not None and event.outcome == "failed"
    assert event.excluded == () and event.summarized == {} and event.tokens_saved == 0
    assert event.tokens_before == before.active_tokens == event.tokens_after
    assert event.attempts == 1 and event.duration_seconds is not None
    assert event.duration_seconds >= 0
    assert event.summarizer is not None and event.summarizer.endswith("FakeSummarizer")
    [failure] = event.diagnostics
    assert failure.kind == "failed" and failure.strategy == "SummarizationStrategy"
    assert failure.error_type is not None
    assert failure.error_type.endswith(FakeSummarizerError.__qualname__)
    assert failure.error_message == "fake summarizer failure"
    assert await any_store.audit(SESSION) == [event]
    after = await any_store.stats(SESSION)
    assert after.active_tokens == before.active_tokens and after.events == 1


async def test_a_summarizer_that_returns_nothing_is_a_failed_event(
    any_store: HistoryBackend,
) -> None:
    await any_store.append(SESSION, _turns(4))
    event = await any_store.compact(SESSION, _summarization(FakeSummarizer(fail="empty")))
    assert event is not None and event.outcome == "failed"
    [failure] = event.diagnostics
    assert failure.error_type is None and "no text" in failure.message


async def test_the_summarizers_model_is_recorded(any_store: HistoryBackend) -> None:
    class Completions:
        async def create(self, **kwargs: Any) -> Any:
            raise RuntimeError("model unavailable")

    @dataclass
    class Chat:
        completions: Completions

    @dataclass
    class Client:
        chat: Chat

    summarizer = OpenAICompatibleSummarizer(Client(Chat(Completions())), model="tiny-model")
    await any_store.append(SESSION, _turns(4))
    event = await any_store.compact(SESSION, _summarization(summarizer))
    assert event is not None and event.outcome == "failed"
    assert event.summarizer_model == "tiny-model"
    assert event.summarizer is not None and event.summarizer.endswith("OpenAICompatibleSummarizer")
    assert event.diagnostics[0].error_message == "model unavailable"


async def test_an_applied_summary_names_its_summarizer(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(4))
    event = await any_store.compact(SESSION, _summarization(FakeSummarizer()))
    assert event is not None and event.outcome == "applied" and event.summarized
    assert event.summarizer is not None and event.summarizer.endswith("FakeSummarizer")
    assert event.summarizer_model is None and event.diagnostics == ()


async def _pin_everything(store: HistoryBackend) -> None:
    view = await store.view(SESSION)
    await store.pin(SESSION, [g.group_id for g in view.groups])


@pytest.mark.parametrize("kind", ["truncation", "token_budget", "context_window"])
async def test_pins_above_the_budget_are_a_blocked_event(
    any_store: HistoryBackend, kind: str
) -> None:
    await any_store.append(SESSION, _turns(6))
    await _pin_everything(any_store)
    active = (await any_store.stats(SESSION)).active_tokens
    budget = active // 4
    strategy = {
        "truncation": TruncationStrategy(max_n=budget, compact_to=budget, tokenizer=TOKENIZER),
        "token_budget": TokenBudgetComposedStrategy(
            token_budget=budget, tokenizer=TOKENIZER, strategies=[]
        ),
        "context_window": ContextWindowCompactionStrategy(
            max_context_window_tokens=budget + 10, max_output_tokens=10
        ),
    }[kind]
    event = await any_store.compact(SESSION, strategy)
    assert event is not None and event.outcome == "blocked"
    assert event.excluded == () and event.tokens_before == event.tokens_after == active
    blocked = [d for d in event.diagnostics if d.kind == "blocked"]
    assert blocked and blocked[-1].tokens == active and blocked[-1].budget == budget
    assert (await any_store.stats(SESSION)).active_tokens == active
    assert [e.id for e in await any_store.audit(SESSION, outcome="blocked")] == [event.id]


async def test_a_pipeline_passes_on_its_steps_diagnostics(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(6))
    pipeline = PipelineStrategy(
        _summarization(FakeSummarizer(fail="error")),
        TruncationStrategy(max_n=100_000, compact_to=100_000),
    )
    event = await any_store.compact(SESSION, pipeline)
    assert event is not None and event.outcome == "failed"
    assert event.strategy == "PipelineStrategy"
    assert [d.strategy for d in event.diagnostics] == ["SummarizationStrategy"]


async def test_an_applied_event_keeps_the_diagnostics_of_a_step_that_failed(
    any_store: HistoryBackend,
) -> None:
    await any_store.append(SESSION, _turns(6))
    budget = TokenBudgetComposedStrategy(
        token_budget=1,
        tokenizer=TOKENIZER,
        strategies=[_summarization(FakeSummarizer(fail="error"))],
    )
    event = await any_store.compact(SESSION, budget)
    assert event is not None and event.outcome == "applied" and event.excluded
    assert "failed" in {d.kind for d in event.diagnostics}
    undone = await any_store.restore(SESSION, event_id=event.id)
    assert undone is not None and undone.outcome == "applied"


@dataclass
class ExcludeFirst:
    """Excludes the oldest non-system group not pinned."""

    @property
    def name(self) -> str:
        return "exclude_first"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        group = next(g.group_id for g in view.groups if g.kind != "system" and not g.pinned)
        return ChangeSet(exclusions=(Exclusion(group, "test"),), strategy=self.name)


@dataclass
class Interfering:
    """Plans like :class:`ExcludeFirst`, but a concurrent writer pins that very group
    before the plan returns (the group changed: a conflict)."""

    store: HistoryBackend
    plans: int = 0

    @property
    def name(self) -> str:
        return "interfering"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        self.plans += 1
        changes = await ExcludeFirst().plan(view)
        await self.store.pin(SESSION, [e.group_id for e in changes.exclusions])
        return ChangeSet(exclusions=changes.exclusions, strategy=self.name)


async def test_a_conflict_provoked_twice_is_an_abandoned_event(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(3))
    strategy = Interfering(any_store)
    event = await any_store.compact(SESSION, strategy)
    assert strategy.plans == 2
    assert event is not None and event.outcome == "abandoned" and event.attempts == 2
    assert event.excluded == () and event.tokens_saved == 0
    assert event.tokens_before == event.tokens_after
    assert [(e.strategy, e.outcome) for e in await any_store.audit(SESSION)] == [
        ("interfering", "abandoned")
    ]
    assert await any_store.excluded(SESSION) == []


async def test_a_plan_another_compaction_carried_out_meanwhile_records_nothing(
    any_store: HistoryBackend,
) -> None:
    """Writers sharing a session plan alike: a group another compaction excluded since
    the snapshot is done, not a conflict (no second plan, no ``abandoned`` row)."""
    await any_store.append(SESSION, _turns(3))
    plans: list[View] = []

    @dataclass
    class Raced(ExcludeFirst):
        async def plan(self, view: View) -> ChangeSet:
            plans.append(view)
            changes = await super().plan(view)
            await any_store.compact(SESSION, ExcludeFirst())
            return changes

    assert await any_store.compact(SESSION, Raced()) is None
    assert len(plans) == 1
    assert [(e.strategy, e.outcome) for e in await any_store.audit(SESSION)] == [
        ("exclude_first", "applied")
    ]
    assert len(await any_store.excluded(SESSION)) == 1


async def test_no_row_for_a_no_change_run_nor_a_dry_run(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(3))
    roomy = TruncationStrategy(max_n=1000, compact_to=500)
    assert await any_store.compact(SESSION, roomy) is None
    failing = _summarization(FakeSummarizer(fail="error"))
    planned = await any_store.compact(SESSION, failing, dry_run=True)
    assert planned.is_empty and planned.diagnostics[0].kind == "failed"
    tight = TruncationStrategy(max_n=2, compact_to=1)
    assert not (await any_store.compact(SESSION, tight, dry_run=True)).is_empty
    assert await any_store.audit(SESSION) == []
    assert (await any_store.stats(SESSION)).events == 0


async def test_audit_filters_by_outcome(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(5))
    failed = await any_store.compact(SESSION, _summarization(FakeSummarizer(fail="error")))
    applied = await any_store.compact(SESSION, TruncationStrategy(max_n=4, compact_to=2))
    assert failed is not None and applied is not None
    assert [e.id for e in await any_store.audit(SESSION)] == [applied.id, failed.id]
    assert [e.id for e in await any_store.audit(SESSION, outcome="failed")] == [failed.id]
    assert [e.id for e in await any_store.audit(outcome="applied")] == [applied.id]
    assert await any_store.audit(SESSION, outcome="abandoned") == []
    with pytest.raises(InvalidInput, match="unknown outcome"):
        await any_store.audit(SESSION, outcome="lost")  # type: ignore[arg-type]


async def test_only_applied_events_restore(any_store: HistoryBackend) -> None:
    await any_store.append(SESSION, _turns(4))
    failed = await any_store.compact(SESSION, _summarization(FakeSummarizer(fail="error")))
    assert failed is not None
    with pytest.raises(InvalidInput, match="is failed"):
        await any_store.restore(SESSION, event_id=failed.id)
    applied = await any_store.compact(SESSION, TruncationStrategy(max_n=4, compact_to=2))
    assert applied is not None
    restored = await any_store.restore(SESSION, event_id=applied.id)
    assert restored is not None and set(restored.restored) == set(applied.excluded)
