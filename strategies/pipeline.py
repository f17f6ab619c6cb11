"""Pipelines: several strategies in order, each on the view the previous ones left.

:class:`PipelineStrategy` (from Agent Framework's .NET side) plans each strategy on the
view left by applying the change sets of those before it (in memory, with
:meth:`~strategies.view.View.apply`); each strategy keeps its own trigger. The result
is one change set, the parts chained by :func:`strategies._selection.combine` (the same
composition the token budget and the context window use), which leaves the same
projection as applying the parts one after the other, without what a later part undoes
(a summary excluded later is never written; a reduction of a group removed later is
dropped).

Like every strategy it takes ``trigger=None, target=None``: with a ``trigger`` the whole
pipeline acts only when it fires; the ``target`` (default: the trigger no longer fires;
with neither, none) is checked before each step, and the steps after it holds are not
run.
"""

from __future__ import annotations

from typing import Any

from strategies._selection import combine, stop_when, trigger_params
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.triggers import Trigger
from strategies.view import View

__all__ = ["PipelineStrategy"]


class PipelineStrategy:
    """Run ``strategies`` in order; the combined change set is labelled as the pipeline's."""

    def __init__(
        self,
        *strategies: CompactionStrategy,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Keep the strategies (each must be a :class:`CompactionStrategy`)."""
        for strategy in strategies:
            if not isinstance(strategy, CompactionStrategy):
                raise TypeError(f"{strategy!r} is not a compaction strategy")
        self.strategies: tuple[CompactionStrategy, ...] = strategies
        self.trigger = trigger
        self.target = target

    @property
    def name(self) -> str:
        """``"PipelineStrategy"``."""
        return "PipelineStrategy"

    def params(self) -> dict[str, Any]:
        """The nested strategies, in order, each with its name and params; the trigger
        and target."""
        return {
            "strategies": [{"name": s.name, "params": s.params()} for s in self.strategies],
            **trigger_params(self.trigger, self.target),
        }

    async def plan(self, view: View) -> ChangeSet:
        """Plan each strategy on the view the previous ones leave, and chain the results."""
        params = self.params()
        if self.trigger is not None and not self.trigger(view):
            return ChangeSet(strategy=self.name, params=params)
        target = stop_when(self.trigger, self.target)
        parts: list[ChangeSet] = []
        current = view
        for strategy in self.strategies:
            if target is not None and target(current):
                break
            changes = await strategy.plan(current)
            if changes.is_empty:
                continue
            parts.append(changes)
            current = current.apply(changes)
        return combine(parts, strategy=self.name, params=params)
