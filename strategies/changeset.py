"""Change sets: what a strategy decides, without mutating anything.

A :class:`ChangeSet` lists groups to exclude (each with a reason), summaries to insert
(each placed where the first group it replaces was, and replacing those groups), and
reductions (a reduced version of a stored tool-result message that the projection shows
instead of the original, which stays stored). It also carries :class:`Diagnostic` notes:
what a strategy could not do (a summarizer that failed, protected groups alone above the
budget), for the store's audit; a strategy that reports none needs to do nothing.
Applying one is the store's job (in SQL)
or :meth:`strategies.view.View.apply`'s (in memory); both apply the parts in the same
order: summaries in order, then exclusions, then reductions.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from strategies.groups import group_id_for
from strategies.messages import Content, Message

__all__ = [
    "ChangeSet",
    "Diagnostic",
    "DiagnosticKind",
    "Exclusion",
    "Reduction",
    "SummaryInsert",
]

DiagnosticKind = Literal["failed", "blocked"]
"""What went wrong: ``failed`` (the strategy's own step failed, e.g. a summarizer raised or
returned nothing) or ``blocked`` (protected groups alone keep the view above its bound)."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """What a strategy could not do, for the audit (pure data, JSON-friendly)."""

    kind: DiagnosticKind
    strategy: str
    """Name of the strategy (the step, inside a pipeline or a budget) that reports it."""
    message: str
    """One sentence for people."""
    error_type: str | None = None
    """``failed``: the qualified name of the exception raised, if one was."""
    error_message: str | None = None
    """``failed``: the exception's message, if one was raised."""
    tokens: int | None = None
    """``blocked``: the view's active tokens (or messages, see ``unit``) left."""
    budget: int | None = None
    """``blocked``: the bound they stay above (None when the bound is a trigger)."""
    unit: Literal["tokens", "messages"] = "tokens"
    """What ``tokens`` and ``budget`` count."""
    summarizer: str | None = None
    """The summarizer's qualified class name, for a summarization step."""
    model: str | None = None
    """The summarizer's model, when it has one."""

    def as_json(self) -> dict[str, Any]:
        """The diagnostic as a JSON object (None fields left out)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        """The diagnostic :meth:`as_json` wrote (unknown keys ignored)."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        return cls(**known)


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Exclude one whole group from the projection."""

    group_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SummaryInsert:
    """Insert ``message`` as a ``summary`` group replacing ``replaces`` (group ids, in order).

    The summary takes the position of the first replaced group; the replaced groups are
    excluded with the reason ``summarized`` and linked to the summary.
    """

    message: Message
    replaces: tuple[str, ...]
    summarizer: str | None = None
    """Qualified class name of the summarizer that wrote it, when one did."""
    model: str | None = None
    """The summarizer's model, when it has one."""

    @property
    def group_id(self) -> str:
        """The id of the summary group this insert creates."""
        return group_id_for(self.message.message_id)


@dataclass(frozen=True, slots=True)
class Reduction:
    """Show ``message`` instead of the stored message with the same id.

    ``message`` is the original with reduced contents (same id, role and metadata);
    the original stays stored. Token counts are the view's, before and after.
    """

    group_id: str
    message: Message
    reason: str
    tokens_before: int
    tokens_after: int

    @property
    def message_id(self) -> str:
        """Id of the stored message this reduces."""
        return self.message.message_id

    @property
    def contents(self) -> list[Content]:
        """The reduced contents."""
        return self.message.contents


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """A strategy's decision. Empty when the strategy changes nothing."""

    exclusions: tuple[Exclusion, ...] = ()
    summaries: tuple[SummaryInsert, ...] = ()
    reductions: tuple[Reduction, ...] = ()
    strategy: str = ""
    """Name of the strategy that planned it."""
    params: dict[str, Any] = field(default_factory=dict)
    """The strategy's parameters, JSON-serializable, for the audit row."""
    diagnostics: tuple[Diagnostic, ...] = ()
    """What the strategy (or its steps) could not do; they change nothing by themselves."""

    @property
    def is_empty(self) -> bool:
        """Whether applying this change set would change nothing (diagnostics aside)."""
        return not (self.exclusions or self.summaries or self.reductions)

    @property
    def touched_group_ids(self) -> frozenset[str]:
        """Ids of the existing groups this change set excludes, replaces or reduces."""
        inserted = {s.group_id for s in self.summaries}
        ids = {e.group_id for e in self.exclusions}
        ids.update(g for s in self.summaries for g in s.replaces)
        ids.update(r.group_id for r in self.reductions)
        return frozenset(ids - inserted)

    def without(self, group_ids: Collection[str]) -> ChangeSet:
        """This change set less what it does to ``group_ids``: their exclusions and
        reductions, and every summary replacing one of them (whole: a summary never
        replaces part of what it was written for), with what it does to that summary.
        Diagnostics stay."""
        gone = set(group_ids)
        summaries = self.summaries
        while dropped := {
            s.group_id for s in summaries if s.group_id in gone or gone.intersection(s.replaces)
        }:  # a summary of a dropped summary goes too
            gone.update(dropped)
            summaries = tuple(s for s in summaries if s.group_id not in dropped)
        return replace(
            self,
            exclusions=tuple(e for e in self.exclusions if e.group_id not in gone),
            summaries=summaries,
            reductions=tuple(r for r in self.reductions if r.group_id not in gone),
        )

    def then(self, other: ChangeSet) -> ChangeSet:
        """The change set that applies ``self`` and then ``other`` (planned on the result)."""
        return ChangeSet(
            exclusions=self.exclusions + other.exclusions,
            summaries=self.summaries + other.summaries,
            reductions=_merge_reductions(self.reductions, other.reductions),
            strategy=self.strategy or other.strategy,
            params=self.params or other.params,
            diagnostics=_merge_diagnostics(self.diagnostics, other.diagnostics),
        )

    @classmethod
    def combine(
        cls, parts: Sequence[ChangeSet], *, strategy: str, params: dict[str, Any]
    ) -> ChangeSet:
        """Chain ``parts`` in order, labelled as one strategy's decision."""
        out = cls(strategy=strategy, params=params)
        for part in parts:
            out = out.then(part)
        return ChangeSet(
            exclusions=out.exclusions,
            summaries=out.summaries,
            reductions=out.reductions,
            strategy=strategy,
            params=params,
            diagnostics=out.diagnostics,
        )

    def with_diagnostics(self, *diagnostics: Diagnostic | None) -> ChangeSet:
        """This change set with ``diagnostics`` added (None ones skipped)."""
        added = tuple(d for d in diagnostics if d is not None)
        if not added:
            return self
        return replace(self, diagnostics=_merge_diagnostics(self.diagnostics, added))


def _merge_diagnostics(
    first: tuple[Diagnostic, ...], second: tuple[Diagnostic, ...]
) -> tuple[Diagnostic, ...]:
    """Both, in order, each reported once (a step planned twice reports the same)."""
    return tuple(dict.fromkeys(first + second))


def _merge_reductions(
    first: tuple[Reduction, ...], second: tuple[Reduction, ...]
) -> tuple[Reduction, ...]:
    """Later reductions of the same message win."""
    later = {r.message_id for r in second}
    return tuple(r for r in first if r.message_id not in later) + second
