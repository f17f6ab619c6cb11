"""Pipelines: several strategies in order, each on the view the previous ones left.

:class:`PipelineStrategy` (from Agent Framework's .NET side) plans each strategy on the
view left by applying the change sets of those before it (in memory, with
:meth:`~strategies.view.View.apply`); each strategy keeps its own trigger. The parts are
chained by :func:`strategies._selection.combine` (the same composition the token budget
and the context window use), which leaves the same projection as applying the parts one
after the other, without what a later part undoes (a summary excluded later is never
written; a reduction of a group removed later is dropped).

One pass over the strategies is not always a fixed point: a later strategy can change
what an earlier one decided on. A summary can count more tokens than the groups it
replaced (an earlier token bound fires again), or replace a group an earlier strategy
protects (truncation's first user group), leaving an unprotected summary over that
strategy's bound. Run again, the pipeline would then exclude the summary it had just
written, and every turn would churn. So the pipeline goes on, pass after pass, on its
own result until every strategy has been planned on the current view without a change
(at most :data:`MAX_PASSES` passes; a warning is logged if it has not settled by then):
planning it again on the view it leaves changes nothing. A strategy is not planned
again on a view it has already left unchanged, so a failing summarizer is not asked
twice; a summarizer is called again only when a summarization step would act on the
next run anyway (a summarization stopped by its input bound goes on). This is a
deliberate deviation from the reference's single pass (docs/strategies.md, 10).

Like every strategy it takes ``trigger=None, target=None``: with a ``trigger`` the whole
pipeline acts only when it fires; the ``target`` (default: the trigger no longer fires;
with neither, none) is checked before each step, and the steps after it holds are not
run. Each pass is exactly what planning the pipeline on the current view would do.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from strategies._selection import combine, stop_when, trigger_params
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet, Diagnostic
from strategies.triggers import Trigger
from strategies.view import View

__all__ = ["MAX_PASSES", "PipelineStrategy"]

logger = logging.getLogger("chatledger.strategies")

MAX_PASSES: Final[int] = 3
"""Passes over the strategies at most (the last steps of a settled plan confirm that
nothing changes)."""


class PipelineStrategy:
    """Run ``strategies`` in order until a pass changes nothing; the combined change set
    is labelled as the pipeline's."""

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
        """Plan the strategies pass after pass until none changes the view, and chain
        the results."""
        parts: list[ChangeSet] = []
        notes: list[Diagnostic] = []
        if self.strategies and (self.trigger is None or self.trigger(view)):
            parts = await self._settle(view, notes)
        return combine(parts, strategy=self.name, params=self.params()).with_diagnostics(*notes)

    async def _settle(self, view: View, notes: list[Diagnostic]) -> list[ChangeSet]:
        """The change sets of the steps, in turn, each planned on the view the previous
        ones leave, until every strategy has been planned without a change on the view
        as it is (a strategy is not planned again on a view it left unchanged); the
        steps' diagnostics, empty steps' included, go to ``notes``."""
        target = stop_when(self.trigger, self.target)
        count = len(self.strategies)
        parts: list[ChangeSet] = []
        current = view
        unchanged = 0  # strategies planned in a row without a change
        for step in range(MAX_PASSES * count):
            position = step % count
            if position == 0 and step and self.trigger is not None and not self.trigger(current):
                break  # a new pass, as planning the pipeline on ``current`` would start
            if target is not None and target(current):
                break
            changes = await self.strategies[position].plan(current)
            notes.extend(changes.diagnostics)
            if changes.is_empty:
                unchanged += 1
                if unchanged == count:
                    break
                continue
            parts.append(changes)
            current = current.apply(changes)
            unchanged = 0
        else:
            logger.warning(
                "%s did not settle in %d passes: planning it again may change more",
                self.name,
                MAX_PASSES,
            )
        return parts
