"""Token budget: run strategies in order until the active tokens fit a budget.

Same name, keywords and defaults as Agent Framework's ``TokenBudgetComposedStrategy``,
plus ``exclude_system_on_fallback``. Each strategy plans on the view the previous ones
left; with ``early_stop`` the chain stops as soon as the budget holds. If it still does
not, a fallback excludes the oldest unprotected groups until it does.

Unlike the reference, the fallback never excludes system groups unless
``exclude_system_on_fallback=True`` (the reference always drops them when the rest is
not enough), nor the newest user group, pinned groups or the in-flight tail. Tokens are
the view's cached counts; ``tokenizer`` must be the view's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strategies._selection import (
    Goal,
    combine,
    count_metric,
    exclude_oldest,
    exclusions,
    protected_ids,
    trigger_params,
    warn_unreached,
)
from strategies.base import CompactionStrategy, check_tokenizer
from strategies.changeset import ChangeSet, Diagnostic
from strategies.tokenizers import Tokenizer
from strategies.triggers import Not, TokensExceed, Trigger
from strategies.view import View

__all__ = ["TokenBudgetComposedStrategy"]


class TokenBudgetComposedStrategy:
    """Compose ``strategies`` until the active tokens are at most ``token_budget``."""

    name = "TokenBudgetComposedStrategy"

    def __init__(
        self,
        *,
        token_budget: int,
        tokenizer: Tokenizer,
        strategies: Sequence[CompactionStrategy],
        early_stop: bool = True,
        exclude_system_on_fallback: bool = False,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Keep the parameters (``token_budget >= 0``)."""
        if token_budget < 0:
            raise ValueError(f"token_budget must be at least 0, got {token_budget}")
        self.token_budget = token_budget
        self.tokenizer = tokenizer
        self.strategies = tuple(strategies)
        self.early_stop = early_stop
        self.exclude_system_on_fallback = exclude_system_on_fallback
        self.trigger = trigger
        self.target = target

    def params(self) -> dict[str, Any]:
        """The parameters, as JSON (nested strategies by their own params)."""
        return {
            "token_budget": self.token_budget,
            "tokenizer": self.tokenizer.name,
            "strategies": [{"name": s.name, "params": s.params()} for s in self.strategies],
            "early_stop": self.early_stop,
            "exclude_system_on_fallback": self.exclude_system_on_fallback,
            **trigger_params(self.trigger, self.target),
        }

    def _goal(self) -> Goal:
        target = self.target
        if target is None and self.trigger is not None:
            target = Not(self.trigger)
        return Goal(metric=count_metric(self.tokenizer), limit=self.token_budget, target=target)

    def _fires(self, view: View) -> bool:
        trigger = self.trigger or TokensExceed(self.token_budget)
        return trigger(view)

    async def plan(self, view: View) -> ChangeSet:
        """The strategies' change sets in order, then the fallback's, as one change set."""
        check_tokenizer(self.name, self.tokenizer, view)
        params = self.params()
        if not self._fires(view):
            return ChangeSet(strategy=self.name, params=params)
        goal = self._goal()
        parts: list[ChangeSet] = []
        notes: list[Diagnostic | None] = []
        current = view
        for strategy in self.strategies:
            part = await strategy.plan(current)
            notes.extend(part.diagnostics)
            if not part.is_empty:
                parts.append(part)
                current = current.apply(part)
            if self.early_stop and _holds(goal, current):
                return combine(parts, strategy=self.name, params=params).with_diagnostics(*notes)
        if not _holds(goal, current):
            parts.extend(self._fallback(current, goal))
            current = view.apply(combine(parts, strategy=self.name, params=params))
            protected = protected_ids(current, preserve_system=not self.exclude_system_on_fallback)
            notes.append(warn_unreached(self.name, view, current, goal, protected))
        return combine(parts, strategy=self.name, params=params).with_diagnostics(*notes)

    def _fallback(self, view: View, goal: Goal) -> list[ChangeSet]:
        protected = protected_ids(view)
        candidates = [g for g in view.groups if g.group_id not in protected]
        chosen = exclude_oldest(view, candidates, goal)
        out = [ChangeSet(exclusions=exclusions(chosen, "token_budget_fallback"))]
        if not self.exclude_system_on_fallback:
            return out
        after = view.apply(out[0])
        if _holds(goal, after):
            return out
        keep = protected_ids(after, preserve_system=False)
        systems = [g for g in after.groups if g.kind == "system" and g.group_id not in keep]
        strict = exclude_oldest(after, systems, goal)
        out.append(ChangeSet(exclusions=exclusions(strict, "token_budget_fallback_strict")))
        return out


def _holds(goal: Goal, view: View) -> bool:
    if goal.target is not None:
        return goal.target(view)
    return goal.start(view) <= goal.limit
