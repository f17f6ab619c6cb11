"""Truncation: exclude the oldest groups when a metric exceeds a threshold.

Same name, keywords and defaults as Agent Framework's ``TruncationStrategy``. The metric
is the active messages (no ``tokenizer``) or the active tokens, read from the view's
cached counts (``tokenizer`` given; it must be the view's). When the metric exceeds
``max_n``, whole groups are excluded oldest-first until it is at most ``compact_to``.

Unlike the reference, the newest user group (the request being answered), pinned
groups and the in-flight tail are never excluded, besides system groups (unless
``preserve_system=False``) and the group that keeps the projection non-empty.
"""

from __future__ import annotations

from typing import Any

from strategies._selection import (
    Goal,
    changeset,
    count_metric,
    exclude_oldest,
    protected_ids,
    tokenizer_params,
    trigger_params,
    warn_unreached,
)
from strategies.base import check_tokenizer
from strategies.changeset import ChangeSet
from strategies.tokenizers import Tokenizer
from strategies.triggers import Not, Trigger
from strategies.view import View

__all__ = ["TruncationStrategy"]


class TruncationStrategy:
    """Oldest-first exclusion of whole groups above ``max_n``, down to ``compact_to``."""

    name = "TruncationStrategy"
    reason = "truncation"

    def __init__(
        self,
        *,
        max_n: int,
        compact_to: int,
        tokenizer: Tokenizer | None = None,
        preserve_system: bool = True,
        preserve_first_user_group: bool = False,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Validate and keep the parameters (``0 < compact_to <= max_n``)."""
        if max_n <= 0:
            raise ValueError(f"max_n must be greater than 0, got {max_n}")
        if compact_to <= 0:
            raise ValueError(f"compact_to must be greater than 0, got {compact_to}")
        if compact_to > max_n:
            raise ValueError(f"compact_to ({compact_to}) must be at most max_n ({max_n})")
        self.max_n = max_n
        self.compact_to = compact_to
        self.tokenizer = tokenizer
        self.preserve_system = preserve_system
        self.preserve_first_user_group = preserve_first_user_group
        self.trigger = trigger
        self.target = target

    def params(self) -> dict[str, Any]:
        """The parameters, as JSON."""
        return {
            "max_n": self.max_n,
            "compact_to": self.compact_to,
            "tokenizer": tokenizer_params(self.tokenizer),
            "preserve_system": self.preserve_system,
            "preserve_first_user_group": self.preserve_first_user_group,
            **trigger_params(self.trigger, self.target),
        }

    def _goal(self) -> Goal:
        metric = count_metric(self.tokenizer)
        target = self.target
        if target is None and self.trigger is not None:
            target = Not(self.trigger)
        return Goal(metric=metric, limit=self.compact_to, target=target)

    def fires(self, view: View) -> bool:
        """Whether the strategy acts on ``view``."""
        if self.trigger is not None:
            return self.trigger(view)
        metric = count_metric(self.tokenizer)
        return sum(metric(g) for g in view.groups) > self.max_n

    async def plan(self, view: View) -> ChangeSet:
        """Exclude the oldest unprotected groups until the goal holds."""
        check_tokenizer(self.name, self.tokenizer, view)
        params = self.params()
        if not self.fires(view):
            return ChangeSet(strategy=self.name, params=params)
        protected = protected_ids(
            view,
            preserve_system=self.preserve_system,
            preserve_first_user_group=self.preserve_first_user_group,
        )
        candidates = [g for g in view.groups if g.group_id not in protected]
        goal = self._goal()
        chosen = exclude_oldest(view, candidates, goal)
        changes = changeset(self.name, params, chosen, self.reason)
        blocked = warn_unreached(self.name, view, view.apply(changes), goal, protected)
        return changes.with_diagnostics(blocked)
