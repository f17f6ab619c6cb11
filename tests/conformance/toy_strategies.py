"""Tiny strategies for the store tests, on any backend: each returns its change set directly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from strategies.changeset import ChangeSet, Exclusion, Reduction, SummaryInsert
from strategies.messages import FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.view import View

__all__ = [
    "TOKENIZER",
    "ExcludeOldest",
    "Fixed",
    "Gated",
    "Interfering",
    "ReduceResults",
    "SummarizeOldest",
]

TOKENIZER = CharacterEstimatorTokenizer()


def _candidates(view: View) -> list[str]:
    """Groups a strategy may touch: not system, not pinned, not the newest user group."""
    newest = view.last_user_index()
    return [
        g.group_id
        for i, g in enumerate(view.groups)
        if g.kind != "system" and not g.pinned and i != newest
    ]


@dataclass
class ExcludeOldest:
    """Excludes the ``n`` oldest candidate groups."""

    n: int = 1
    reason: str = "test_excluded"

    @property
    def name(self) -> str:
        return "exclude_oldest"

    def params(self) -> dict[str, Any]:
        return {"n": self.n}

    async def plan(self, view: View) -> ChangeSet:
        ids = _candidates(view)[: self.n]
        return ChangeSet(
            exclusions=tuple(Exclusion(g, self.reason) for g in ids),
            strategy=self.name,
            params=self.params(),
        )


@dataclass
class SummarizeOldest:
    """Replaces the ``n`` oldest candidate groups with one summary (needs at least 2)."""

    n: int = 2
    counter: int = 0

    @property
    def name(self) -> str:
        return "summarize_oldest"

    def params(self) -> dict[str, Any]:
        return {"n": self.n}

    async def plan(self, view: View) -> ChangeSet:
        ids = _candidates(view)[: self.n]
        if len(ids) < 2:
            return ChangeSet(strategy=self.name, params=self.params())
        text = "summary of " + ", ".join(ids)
        summary = Message.text_message(
            "assistant", text, message_id=f"sum_{len(view.groups)}_{ids[0]}"
        )
        return ChangeSet(
            summaries=(SummaryInsert(message=summary, replaces=tuple(ids)),),
            strategy=self.name,
            params=self.params(),
        )


@dataclass
class ReduceResults:
    """Replaces every tool result (not reduced yet) by ``[reduced]``."""

    marker: str = "[reduced]"

    @property
    def name(self) -> str:
        return "reduce_results"

    def params(self) -> dict[str, Any]:
        return {"marker": self.marker}

    async def plan(self, view: View) -> ChangeSet:
        reductions = []
        loaded = await view.messages()
        for group in view.groups:
            for message in loaded[group.group_id]:
                results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
                if not results or all(r.result == self.marker for r in results):
                    continue
                contents = [
                    c.model_copy(update={"result": self.marker})
                    if isinstance(c, FunctionResultContent)
                    else c
                    for c in message.contents
                ]
                reduced = message.model_copy(update={"contents": contents})
                reductions.append(
                    Reduction(
                        group_id=group.group_id,
                        message=reduced,
                        reason="reduced_for_test",
                        tokens_before=view.count(message),
                        tokens_after=view.count(reduced),
                    )
                )
        return ChangeSet(reductions=tuple(reductions), strategy=self.name, params=self.params())


@dataclass
class Fixed:
    """Returns the same change set whatever the view."""

    changes: ChangeSet

    @property
    def name(self) -> str:
        return "fixed"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        return self.changes


@dataclass
class Gated:
    """Wraps a strategy; each plan waits for ``gate`` after signalling ``entered``."""

    inner: ExcludeOldest | SummarizeOldest | ReduceResults
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    plans: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    async def plan(self, view: View) -> ChangeSet:
        self.plans += 1
        self.entered.set()
        await self.gate.wait()
        return await self.inner.plan(view)


@dataclass
class Interfering:
    """Plans with ``inner``, then runs ``hook`` (a concurrent writer) before returning."""

    inner: ExcludeOldest | Fixed | SummarizeOldest | ReduceResults
    hook: Callable[[], Awaitable[None]]
    plans: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def params(self) -> dict[str, Any]:
        return self.inner.params()

    async def plan(self, view: View) -> ChangeSet:
        self.plans += 1
        changes = await self.inner.plan(view)
        await self.hook()
        return changes


@dataclass
class ExcludeGroup:
    """Excludes one group, when the view holds it."""

    group_id: str

    @property
    def name(self) -> str:
        return "exclude_group"

    def params(self) -> dict[str, Any]:
        return {"group_id": self.group_id}

    async def plan(self, view: View) -> ChangeSet:
        found = [g.group_id for g in view.groups if g.group_id == self.group_id]
        exclusions = tuple(Exclusion(g, "test_excluded") for g in found)
        return ChangeSet(exclusions=exclusions, strategy=self.name, params=self.params())
