"""Sliding window: keep the newest groups (or turns), exclude the older ones.

Same name, keywords and defaults as Agent Framework's ``SlidingWindowStrategy``, plus
``keep_last_turns`` (exactly one of ``keep_last_groups`` and ``keep_last_turns``). The
window counts non-system groups; system groups stay unless ``preserve_system=False``.

Unlike the reference, the newest user group, pinned groups and the in-flight tail are
kept even outside the window. With a ``trigger`` the strategy acts only when it fires
and stops, oldest-first, as soon as it no longer fires (or ``target`` holds).
"""

from __future__ import annotations

from typing import Any

from strategies._selection import Goal, changeset, exclude_oldest, protected_ids, trigger_params
from strategies.changeset import ChangeSet
from strategies.triggers import Not, Trigger
from strategies.view import GroupView, View

__all__ = ["SlidingWindowStrategy"]


class SlidingWindowStrategy:
    """Keep the last ``keep_last_groups`` non-system groups, or the last ``keep_last_turns``."""

    name = "SlidingWindowStrategy"
    reason = "sliding_window"

    def __init__(
        self,
        *,
        keep_last_groups: int | None = None,
        keep_last_turns: int | None = None,
        preserve_system: bool = True,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Validate and keep the parameters (exactly one window size, above 0)."""
        if (keep_last_groups is None) == (keep_last_turns is None):
            raise ValueError("pass exactly one of keep_last_groups and keep_last_turns")
        size = keep_last_groups if keep_last_groups is not None else keep_last_turns
        if size is not None and size <= 0:
            raise ValueError(f"the window must be more than 0, got {size}")
        self.keep_last_groups = keep_last_groups
        self.keep_last_turns = keep_last_turns
        self.preserve_system = preserve_system
        self.trigger = trigger
        self.target = target

    def params(self) -> dict[str, Any]:
        """The parameters, as JSON."""
        return {
            "keep_last_groups": self.keep_last_groups,
            "keep_last_turns": self.keep_last_turns,
            "preserve_system": self.preserve_system,
            **trigger_params(self.trigger, self.target),
        }

    def _window(self, view: View) -> set[str]:
        non_system = [g for g in view.groups if g.kind != "system"]
        if self.keep_last_groups is not None:
            return {g.group_id for g in non_system[-self.keep_last_groups :]}
        assert self.keep_last_turns is not None
        users = [g for g in non_system if g.kind == "user"]
        if len(users) <= self.keep_last_turns:
            return {g.group_id for g in non_system}
        first = users[-self.keep_last_turns].group_id
        start = next(i for i, g in enumerate(non_system) if g.group_id == first)
        return {g.group_id for g in non_system[start:]}

    def _candidates(self, view: View) -> list[GroupView]:
        keep = self._window(view) | protected_ids(view, preserve_system=self.preserve_system)
        return [g for g in view.groups if g.group_id not in keep]

    async def plan(self, view: View) -> ChangeSet:
        """Exclude the groups outside the window (oldest first, up to the target)."""
        params = self.params()
        if self.trigger is not None and not self.trigger(view):
            return ChangeSet(strategy=self.name, params=params)
        candidates = self._candidates(view)
        target = self.target
        if target is None and self.trigger is not None:
            target = Not(self.trigger)
        if target is not None:
            candidates = exclude_oldest(view, candidates, Goal(lambda g: 0, 0, target))
        return changeset(self.name, params, candidates, self.reason)
