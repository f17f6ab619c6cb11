"""Selection logic shared by the strategies: what is protected, and oldest-first exclusion.

*Protected* groups are never excluded by the exclusion strategies: pinned groups, the
newest user group (the request being answered), the in-flight tail (calls still waiting
for their result after the newest user message), the group that keeps the projection
non-empty (the newest sendable non-system group, as Agent Framework keeps), system
groups unless the caller said otherwise, and the first user group when asked.

:func:`exclude_oldest` walks candidates oldest-first and stops as soon as a goal holds,
in one pass: the default goal keeps a running total of a metric (messages or tokens,
both read from the view's cached counts); a caller's ``target`` trigger is evaluated
on the view that the exclusions so far would leave.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from strategies.changeset import ChangeSet, Exclusion
from strategies.tokenizers import Tokenizer
from strategies.triggers import Trigger
from strategies.view import GroupView, View

__all__ = [
    "Goal",
    "changeset",
    "combine",
    "count_metric",
    "exclude_oldest",
    "exclusions",
    "in_flight_ids",
    "keep_nonempty_id",
    "protected_ids",
    "remaining_view",
    "sendable_tool_groups",
    "tokenizer_params",
    "trigger_params",
    "warn_unreached",
]

logger = logging.getLogger("chatledger.strategies")

Metric = Callable[[GroupView], int]


def count_metric(tokenizer: Tokenizer | None) -> Metric:
    """Tokens (from the view's cache) in token mode, messages otherwise."""
    if tokenizer is None:
        return _messages
    return _tokens


def _messages(group: GroupView) -> int:
    return group.message_count


def _tokens(group: GroupView) -> int:
    return group.token_count


def in_flight_ids(view: View) -> set[str]:
    """Groups with calls still waiting for a result after the newest user message."""
    last_user = view.last_user_index()
    start = 0 if last_user is None else last_user + 1
    return {g.group_id for g in view.groups[start:] if g.pending_calls > 0 and not g.orphan}


def keep_nonempty_id(view: View) -> str | None:
    """The newest sendable non-system group (or newest sendable group): kept so that
    the projection is never empty."""
    sendable = view.sendable()
    for group in reversed(sendable):
        if group.kind != "system":
            return group.group_id
    return sendable[-1].group_id if sendable else None


def protected_ids(
    view: View,
    *,
    preserve_system: bool = True,
    preserve_first_user_group: bool = False,
    keep_newest_user: bool = True,
    keep_nonempty: bool = True,
) -> set[str]:
    """Ids of the groups no exclusion strategy may remove from ``view``."""
    protected = {g.group_id for g in view.groups if g.pinned}
    protected |= in_flight_ids(view)
    if preserve_system:
        protected.update(g.group_id for g in view.groups if g.kind == "system")
    last_user = view.last_user_index()
    if keep_newest_user and last_user is not None:
        protected.add(view.groups[last_user].group_id)
    if preserve_first_user_group:
        first = next((g for g in view.groups if g.kind == "user"), None)
        if first is not None:
            protected.add(first.group_id)
    if keep_nonempty:
        kept = keep_nonempty_id(view)
        if kept is not None:
            protected.add(kept)
    return protected


def sendable_tool_groups(view: View) -> list[GroupView]:
    """Tool-call groups the projection sends (orphans and stale pending calls left out)."""
    return [g for g in view.sendable() if g.kind == "tool_call"]


def remaining_view(view: View, removed: Iterable[str]) -> View:
    """The view without the groups ``removed`` (cheap: no messages are touched)."""
    gone = set(removed)
    if not gone:
        return view
    return replace(view, groups=tuple(g for g in view.groups if g.group_id not in gone))


@dataclass(frozen=True, slots=True)
class Goal:
    """When to stop excluding: ``metric`` at most ``limit``, or ``target`` holds."""

    metric: Metric
    limit: int
    target: Trigger | None = None

    def start(self, view: View) -> int:
        """The metric's value on ``view``."""
        return sum(self.metric(g) for g in view.groups)


def exclude_oldest(view: View, candidates: Sequence[GroupView], goal: Goal) -> list[GroupView]:
    """Candidates to exclude, oldest first, until ``goal`` holds (checked before each)."""
    chosen: list[GroupView] = []
    current = goal.start(view)
    for group in candidates:
        if goal.target is not None:
            if goal.target(remaining_view(view, (g.group_id for g in chosen))):
                break
        elif current <= goal.limit:
            break
        chosen.append(group)
        current -= goal.metric(group)
    return chosen


def exclusions(groups: Iterable[GroupView], reason: str) -> tuple[Exclusion, ...]:
    """One :class:`Exclusion` per group, with ``reason``."""
    return tuple(Exclusion(group_id=g.group_id, reason=reason) for g in groups)


def warn_unreached(strategy: str, view: View, after: View, goal: Goal, protected: set[str]) -> None:
    """Log a warning when protected groups keep the goal out of reach."""
    reached = goal.target(after) if goal.target is not None else goal.start(after) <= goal.limit
    if reached:
        return
    pinned = sum(1 for g in view.groups if g.pinned)
    logger.warning(
        "%s could not reach its target: %d protected groups (%d pinned) remain; "
        "%d tokens and %d messages left",
        strategy,
        len(protected & {g.group_id for g in after.groups}),
        pinned,
        after.token_count,
        after.message_count,
    )


def trigger_params(trigger: Trigger | None, target: Trigger | None) -> dict[str, Any]:
    """The trigger and target, as JSON for params()."""
    return {
        "trigger": None if trigger is None else trigger.params(),
        "target": None if target is None else target.params(),
    }


def tokenizer_params(tokenizer: Tokenizer | None) -> str | None:
    """A tokenizer's name for params(), or None in message-count mode."""
    return None if tokenizer is None else tokenizer.name


def changeset(
    name: str, params: dict[str, Any], excluded: Sequence[GroupView], reason: str
) -> ChangeSet:
    """A change set excluding ``excluded`` with ``reason`` (empty when nothing)."""
    if not excluded:
        return ChangeSet(strategy=name, params=params)
    return ChangeSet(exclusions=exclusions(excluded, reason), strategy=name, params=params)


def combine(parts: Sequence[ChangeSet], *, strategy: str, params: dict[str, Any]) -> ChangeSet:
    """Chain ``parts`` as one change set, without summaries that a later part excludes.

    A summary inserted by one part and excluded by a later one never reaches the
    projection: its replaced groups are excluded instead, with the later reason, so the
    store never writes a summary that is excluded from birth.
    """
    changes = ChangeSet.combine(parts, strategy=strategy, params=params)
    inserted = {s.group_id: s for s in changes.summaries}
    if not inserted or not any(e.group_id in inserted for e in changes.exclusions):
        return changes
    dead: set[str] = set()

    def expand(group_id: str) -> list[str]:
        summary = inserted.get(group_id)
        if summary is None:
            return [group_id]
        dead.add(group_id)
        return [g for replaced in summary.replaces for g in expand(replaced)]

    kept: list[Exclusion] = []
    for exclusion in changes.exclusions:
        kept.extend(
            Exclusion(group_id=g, reason=exclusion.reason) for g in expand(exclusion.group_id)
        )
    return ChangeSet(
        exclusions=tuple(kept),
        summaries=tuple(s for s in changes.summaries if s.group_id not in dead),
        reductions=changes.reductions,
        strategy=strategy,
        params=params,
    )
