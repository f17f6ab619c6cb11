"""Pipelines: several strategies in order, each on the view the previous ones left.

:class:`PipelineStrategy` (from Agent Framework's .NET side) plans each strategy on the
view left by applying the change sets of those before it (in memory, with
:meth:`~strategies.view.View.apply`); each strategy keeps its own trigger. The result
is one change set, the parts chained in order (:meth:`ChangeSet.combine`), which leaves
the same view as applying the parts one after the other; a reduction of a group that a
later part removes is dropped from it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.view import View

__all__ = ["PipelineStrategy"]


class PipelineStrategy:
    """Run ``strategies`` in order; the combined change set is labelled as the pipeline's."""

    def __init__(self, *strategies: CompactionStrategy) -> None:
        for strategy in strategies:
            if not isinstance(strategy, CompactionStrategy):
                raise TypeError(f"{strategy!r} is not a compaction strategy")
        self.strategies: tuple[CompactionStrategy, ...] = strategies

    @property
    def name(self) -> str:
        """``"PipelineStrategy"``."""
        return "PipelineStrategy"

    def params(self) -> dict[str, Any]:
        """The nested strategies, in order, each with its name and params."""
        return {
            "strategies": [
                {"strategy": strategy.name, "params": strategy.params()}
                for strategy in self.strategies
            ]
        }

    async def plan(self, view: View) -> ChangeSet:
        """Plan each strategy on the view the previous ones leave, and chain the results."""
        parts: list[ChangeSet] = []
        current = view
        for strategy in self.strategies:
            changes = await strategy.plan(current)
            if changes.is_empty:
                continue
            parts.append(changes)
            current = current.apply(changes)
        return _prune(ChangeSet.combine(parts, strategy=self.name, params=self.params()))


def _prune(changes: ChangeSet) -> ChangeSet:
    """Drop reductions of groups that a later part excluded or summarized.

    Such a reduction would show nothing (its group is no longer sent), and a change set
    never both removes a group and reduces it.
    """
    gone = {e.group_id for e in changes.exclusions}
    gone.update(g for s in changes.summaries for g in s.replaces)
    kept = tuple(r for r in changes.reductions if r.group_id not in gone)
    if len(kept) == len(changes.reductions):
        return changes
    return replace(changes, reductions=kept)
