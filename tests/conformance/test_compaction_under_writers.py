"""Compaction on write while other writers append: nothing lost, nothing excluded stale.

Slow compactions (a fake summarizer with a delay, and a truncation whose planning
sleeps after taking its snapshot) run while writer tasks append rounds to the same
session (on SQL, a writer process too: ``tests/store/test_compaction_with_a_writer_process``).
Afterwards: every appended message is stored once, in its writer's order, with gapless
``seq``; every exclusion comes from an audited event whose snapshot held the excluded
group (so nothing appended after a snapshot was excluded by that snapshot's change
set); the audit, ``excluded()`` and ``stats()`` agree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from store.contract import HistoryBackend
from store.models import CompactionEvent
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.store.writer import round_messages

SESSION = "s"
TASK_WRITERS = ["w0", "w1", "w2"]
PROCESS_WRITER = "p0"
ROUNDS = 5
COMPACTIONS = 4


class Snapshotting:
    """Wraps a strategy: records the groups of every view it plans on, then waits."""

    def __init__(self, inner: CompactionStrategy, *, delay: float = 0.0) -> None:
        self.inner = inner
        self.delay = delay
        self.snapshots: list[frozenset[str]] = []
        self.messages: list[frozenset[str]] = []

    @property
    def name(self) -> str:
        """The wrapped strategy's name."""
        return self.inner.name

    def params(self) -> dict[str, Any]:
        """The wrapped strategy's parameters."""
        return self.inner.params()

    async def plan(self, view: View) -> ChangeSet:
        """Record the snapshot's group ids, wait, then plan with the wrapped strategy."""
        self.snapshots.append(frozenset(g.group_id for g in view.groups))
        members = await view.messages()
        self.messages.append(frozenset(m.message_id for ms in members.values() for m in ms))
        await self.interfere()
        await asyncio.sleep(self.delay)
        return await self.inner.plan(view)

    async def interfere(self) -> None:
        """What happens between the snapshot and the plan (nothing here)."""


class Interfering(Snapshotting):
    """Appends a late result and a new request between its first ``times`` snapshots and
    their plans, so that those change sets are stale when the store applies them."""

    def __init__(self, inner: CompactionStrategy, store: HistoryBackend, *, times: int) -> None:
        super().__init__(inner)
        self.store = store
        self.times = times

    async def interfere(self) -> None:
        """Answer the old pending call ``c-old<n>`` and add a user request."""
        round_ = len(self.snapshots)
        if round_ > self.times:
            return
        result = FunctionResultContent(call_id=f"c-old{round_}", result="late answer")
        await self.store.append(
            SESSION,
            [
                Message(role="tool", message_id=f"late-t{round_}", contents=[result]),
                Message.text_message("user", f"meanwhile {round_}", message_id=f"late-u{round_}"),
            ],
        )


@dataclass
class Applied:
    """The events the compactions applied, with the snapshot each was planned on."""

    snapshots: dict[str, frozenset[str]] = field(default_factory=dict)

    def add(self, event: CompactionEvent | None, strategy: Snapshotting) -> None:
        """Record ``event`` (if any) with the last snapshot its strategy planned on."""
        if event is not None:
            assert strategy.snapshots, "an event without a plan"
            self.snapshots[event.id] = strategy.snapshots[-1]


def summarizer() -> Snapshotting:
    """Summarize all but the newest two messages, slowly."""
    inner = SummarizationStrategy(client=FakeSummarizer(delay=0.02), target_count=2, threshold=0)
    return Snapshotting(inner)


def truncation() -> Snapshotting:
    """Truncate to the newest few groups, sleeping between snapshot and plan."""
    return Snapshotting(TruncationStrategy(max_n=6, compact_to=3), delay=0.02)


async def write(store: HistoryBackend, writer: str) -> None:
    """Append ``ROUNDS`` rounds as ``writer``, yielding between appends."""
    for index in range(ROUNDS):
        for batch in round_messages(writer, index):
            await store.append(SESSION, batch)
            await asyncio.sleep(0)


async def compact(store: HistoryBackend, make: Any, applied: Applied) -> None:
    """Run ``COMPACTIONS`` compactions one after the other."""
    for _ in range(COMPACTIONS):
        strategy = make()
        applied.add(await store.compact(SESSION, strategy, phase="after_run"), strategy)


async def exercise(
    store: HistoryBackend, settle: Callable[[], Awaitable[None]] | None = None
) -> Applied:
    """Seed the session, then compact twice over while the writer tasks append.

    ``settle`` waits for other writers (a process) before the last, undisturbed compaction.
    """
    await write(store, "seed")
    applied = Applied()
    await asyncio.gather(
        *(write(store, w) for w in TASK_WRITERS),
        compact(store, summarizer, applied),
        compact(store, truncation, applied),
    )
    if settle is not None:
        await settle()
    # once the writers are done, a compaction has nothing to conflict with, and after a
    # few more rounds (the truncation may have left little) it has something to summarize
    await write(store, "tail")
    final = summarizer()
    event = await store.compact(SESSION, final)
    assert event is not None, "an undisturbed summarization of a long session applied nothing"
    applied.add(event, final)
    return applied


async def check(store: HistoryBackend, applied: Applied, writers: list[str]) -> None:
    """Nothing lost or duplicated; every exclusion is audited and came from a snapshot."""
    stored = await store.history(SESSION, include_excluded=True)
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1)), "seq has gaps"
    ids = [m.message_id for m in stored]
    assert len(ids) == len(set(ids)), "a message is stored twice"
    by_id = {m.message_id: m.message for m in stored}
    for writer in writers:
        expected = [m for i in range(ROUNDS) for b in round_messages(writer, i) for m in b]
        mine = [i for i in ids if i.startswith(f"{writer}-")]
        assert mine == [m.message_id for m in expected], f"{writer}'s messages lost or moved"
        assert [by_id[i] for i in mine] == expected
    events = await store.audit(SESSION)
    assert {e.id for e in events} == set(applied.snapshots), "audit and applied events differ"
    for message in stored:
        if not message.excluded:
            continue
        snapshot = applied.snapshots.get(str(message.excluded_event_id))
        assert snapshot is not None, f"{message.message_id} excluded by an unaudited event"
        assert message.group_id in snapshot, (
            f"{message.message_id} (group {message.group_id}) was excluded by event "
            f"{message.excluded_event_id}, planned on a snapshot that did not hold it"
        )
    for event in events:
        touched = {*event.excluded, *event.reduced}
        touched |= {g for groups in event.summarized.values() for g in groups}
        assert touched <= applied.snapshots[event.id], f"event {event.id} touched new groups"
    await check_views(store, stored, events)


async def check_views(
    store: HistoryBackend, stored: list[Any], events: list[CompactionEvent]
) -> None:
    """``excluded()`` and ``stats()`` agree with the stored rows and the audit."""
    by_event = {e.id: e for e in events}
    excluded_groups = {m.group_id for m in stored if m.excluded}
    listed = await store.excluded(SESSION)
    assert {g.group_id for g in listed} == excluded_groups
    for group in listed:
        assert group.event_id in by_event, f"group {group.group_id} has no audited event"
        if group.summary_group_id is not None:
            replaced = by_event[group.event_id].summarized[group.summary_group_id]
            assert group.group_id in replaced
    stats = await store.stats(SESSION)
    assert stats.stored_messages == len(stored)
    assert stats.active_messages == sum(not m.excluded for m in stored)
    assert stats.events == len(events)


def stale_seed() -> list[Message]:
    """A session whose oldest groups include two calls still waiting for their results."""
    out: list[Message] = []
    for round_ in (1, 2):
        call = FunctionCallContent(call_id=f"c-old{round_}", name="lookup")
        out.append(Message.text_message("user", f"old {round_}", message_id=f"old-u{round_}"))
        out.append(Message(role="assistant", message_id=f"old-a{round_}", contents=[call]))
    for index in range(4):
        out.append(Message.text_message("user", f"question {index}", message_id=f"q{index}"))
        out.append(Message.text_message("assistant", f"answer {index}", message_id=f"r{index}"))
    return out


async def stale_plan(store: HistoryBackend, times: int) -> None:
    """A truncation whose plan goes stale ``times`` times: a late result joins a group it
    excludes. Once stale, the store plans again; twice stale, it applies nothing."""
    await store.append(SESSION, stale_seed())
    strategy = Interfering(TruncationStrategy(max_n=3, compact_to=2), store, times=times)
    event = await store.compact(SESSION, strategy)
    stored = await store.history(SESSION, include_excluded=True)
    appended = {f"late-{kind}{n}" for kind in "tu" for n in range(1, min(times, 2) + 1)}
    assert appended <= {m.message_id for m in stored}
    excluded = {m.message_id for m in stored if m.excluded}
    if times >= 2:  # given up: an abandoned event that changed nothing
        assert event is not None and event.outcome == "abandoned" and event.attempts == 2
        assert not excluded and len(strategy.snapshots) == 2
        assert await store.audit(SESSION) == [event]
        return
    assert event is not None and len(strategy.snapshots) == 2, "the stale plan was not redone"
    assert excluded, "the second plan excluded nothing"
    assert excluded <= strategy.messages[-1], "a message outside the snapshot was excluded"
    assert {m.excluded_event_id for m in stored if m.excluded} == {event.id}


async def test_compacts_under_concurrent_appends(store: HistoryBackend) -> None:
    """Task writers on the store while compactions plan slowly."""
    applied = await exercise(store)
    await check(store, applied, ["seed", *TASK_WRITERS, "tail"])


@pytest.mark.parametrize("times", [1, 2])
async def test_never_applies_a_stale_plan(store: HistoryBackend, times: int) -> None:
    """A stale plan is redone once; stale twice, nothing is applied."""
    await stale_plan(store, times)
