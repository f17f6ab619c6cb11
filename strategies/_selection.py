"""Selection logic shared by the strategies: what is protected, and oldest-first exclusion.

*Protected* groups are never excluded by the exclusion strategies: pinned groups, the
newest user group (the request being answered), the in-flight tail (calls still waiting
for their result after the newest user message), the group that keeps the projection
non-empty (the newest sendable non-system group, as Agent Framework keeps), system
groups unless the caller said otherwise, and the first user group when asked.

:func:`exclude_oldest` walks candidates oldest-first and stops as soon as a goal holds,
in one pass: the default goal keeps a running total of a metric (messages or tokens,
both read from the view's cached counts); a caller's ``target`` trigger is evaluated
on the counts that the exclusions so far would leave.

:func:`fewest_until` is the one answer to "the fewest oldest candidates after which the
target holds", shared by exclusions, tool-result summaries and reductions: each candidate
is a :class:`Step` (how it changes the view-level counts), and the triggers of
:mod:`strategies.triggers`, which read only those counts, are evaluated on running
totals, so the cost is linear in the candidates. A trigger it does not know is given the
real view after each prefix (quadratic, but exact).

:func:`combine` is the one way to chain change sets (pipelines, budgets, context window).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from strategies.changeset import ChangeSet, Diagnostic, Exclusion, Reduction, SummaryInsert
from strategies.tokenizers import Tokenizer
from strategies.triggers import (
    All,
    Always,
    GroupsExceed,
    HasToolCalls,
    MessagesExceed,
    Never,
    Not,
    TokensBelow,
    TokensExceed,
    Trigger,
    TurnsExceed,
)
from strategies.triggers import Any as AnyOf
from strategies.view import GroupView, View

__all__ = [
    "Goal",
    "Step",
    "changeset",
    "combine",
    "count_metric",
    "exclude_oldest",
    "exclusions",
    "fewest_until",
    "in_flight_ids",
    "keep_nonempty_id",
    "protected_ids",
    "reduction_steps",
    "remaining_view",
    "removal_steps",
    "sendable_tool_groups",
    "stop_when",
    "summary_steps",
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
    if goal.target is not None:
        ids = [g.group_id for g in candidates]
        count = fewest_until(
            view,
            removal_steps(view, ids),
            goal.target,
            lambda k: remaining_view(view, ids[:k]),
        )
        return list(candidates[:count])
    chosen: list[GroupView] = []
    current = goal.start(view)
    for group in candidates:
        if current <= goal.limit:
            break
        chosen.append(group)
        current -= goal.metric(group)
    return chosen


@dataclass(frozen=True, slots=True)
class Step:
    """How one candidate changes the view-level counts that triggers read."""

    tokens: int = 0
    messages: int = 0
    groups: int = 0
    turns: int = 0
    tool_groups: int = 0

    def __add__(self, other: Step) -> Step:
        return Step(
            self.tokens + other.tokens,
            self.messages + other.messages,
            self.groups + other.groups,
            self.turns + other.turns,
            self.tool_groups + other.tool_groups,
        )


@dataclass(slots=True)
class _Counts:
    """The view-level counts triggers read, kept as running totals."""

    token_count: int
    message_count: int
    group_count: int
    turn_count: int
    tool_groups: int

    @property
    def has_tool_calls(self) -> bool:
        return self.tool_groups > 0

    @classmethod
    def of(cls, view: View) -> _Counts:
        return cls(
            token_count=view.token_count,
            message_count=view.message_count,
            group_count=view.group_count,
            turn_count=view.turn_count,
            tool_groups=sum(1 for g in view.groups if g.kind == "tool_call"),
        )

    def add(self, step: Step) -> None:
        self.token_count += step.tokens
        self.message_count += step.messages
        self.group_count += step.groups
        self.turn_count += step.turns
        self.tool_groups += step.tool_groups


_COUNT_TRIGGERS = (TokensExceed, TokensBelow, MessagesExceed, TurnsExceed, GroupsExceed)


def _reads_counts_only(trigger: Trigger) -> bool:
    """Whether ``trigger`` is built only from the library's count triggers."""
    kind = type(trigger)
    if trigger is Always or trigger is Never or kind in _COUNT_TRIGGERS or kind is HasToolCalls:
        return True
    if isinstance(trigger, All | AnyOf) and kind in (All, AnyOf):
        return all(_reads_counts_only(t) for t in trigger.triggers)
    if isinstance(trigger, Not) and kind is Not:
        return _reads_counts_only(trigger.inner)
    return False


def fewest_until(
    view: View, steps: Sequence[Step], target: Trigger, build: Callable[[int], View]
) -> int:
    """The fewest leading ``steps`` after which ``target`` holds; ``len(steps)`` if never.

    ``target`` is checked before each step. Triggers of :mod:`strategies.triggers` are
    evaluated on running totals (linear); any other trigger on ``build(k)``, the real
    view after the first ``k`` steps.
    """
    if not _reads_counts_only(target):
        return next((k for k in range(len(steps)) if target(build(k))), len(steps))
    counts = _Counts.of(view)
    as_view = cast(View, counts)  # the library's triggers read only these counts
    for k, step in enumerate(steps):
        if target(as_view):
            return k
        counts.add(step)
    return len(steps)


def _leave(group: GroupView) -> Step:
    """The step of removing ``group`` from the active groups."""
    return Step(
        tokens=-group.token_count,
        messages=-group.message_count,
        groups=-1,
        turns=-(group.kind == "user"),
        tool_groups=-(group.kind == "tool_call"),
    )


def removal_steps(view: View, group_ids: Sequence[str]) -> list[Step]:
    """One step per id: excluding that group (nothing when absent or already excluded)."""
    active = {g.group_id: g for g in view.groups}
    steps: list[Step] = []
    for group_id in group_ids:
        group = active.pop(group_id, None)
        steps.append(Step() if group is None else _leave(group))
    return steps


def summary_steps(view: View, summaries: Sequence[SummaryInsert]) -> list[Step]:
    """One step per summary: its replaced groups leave, one summary group of one message
    (counted as :meth:`View.apply` counts it) arrives; as :meth:`View.apply` applies them."""
    active = {g.group_id: g for g in view.groups}
    steps: list[Step] = []
    for summary in summaries:
        replaced = [active.pop(g) for g in summary.replaces if g in active]
        if not replaced:
            steps.append(Step())
            continue
        tokens = view.count(summary.message)
        arrives = Step(tokens=tokens, messages=1, groups=1)
        steps.append(sum((_leave(g) for g in replaced), start=arrives))
        active[summary.group_id] = GroupView(
            group_id=summary.group_id,
            kind="summary",
            turn=replaced[0].turn,
            anchor=replaced[0].anchor,
            message_count=1,
            token_count=tokens,
        )
    return steps


def reduction_steps(view: View, batches: Sequence[Sequence[Reduction]]) -> list[Step]:
    """One step per batch of reductions: their token deltas (reductions change no other
    count); reductions of groups that are not active change nothing."""
    active = {g.group_id for g in view.groups}
    return [
        Step(tokens=sum(r.tokens_after - r.tokens_before for r in batch if r.group_id in active))
        for batch in batches
    ]


def exclusions(groups: Iterable[GroupView], reason: str) -> tuple[Exclusion, ...]:
    """One :class:`Exclusion` per group, with ``reason``."""
    return tuple(Exclusion(group_id=g.group_id, reason=reason) for g in groups)


def warn_unreached(
    strategy: str, view: View, after: View, goal: Goal, protected: set[str]
) -> Diagnostic | None:
    """When protected groups keep the goal out of reach: log a warning and return the
    ``blocked`` diagnostic for the audit (None when the goal is reached)."""
    reached = goal.target(after) if goal.target is not None else goal.start(after) <= goal.limit
    if reached:
        return None
    pinned = sum(1 for g in view.groups if g.pinned)
    left = len(protected & {g.group_id for g in after.groups})
    logger.warning(
        "%s could not reach its target: %d protected groups (%d pinned) remain; "
        "%d tokens and %d messages left",
        strategy,
        left,
        pinned,
        after.token_count,
        after.message_count,
    )
    by_tokens = goal.metric is _tokens
    amount = goal.start(after) if goal.target is None else after.token_count
    budget = goal.limit if goal.target is None else None
    unit: Literal["tokens", "messages"] = "tokens" if by_tokens or budget is None else "messages"
    bound = "its target" if budget is None else f"{budget} {unit}"
    return Diagnostic(
        kind="blocked",
        strategy=strategy,
        message=(f"{left} protected groups ({pinned} pinned) keep {amount} {unit} above {bound}"),
        tokens=amount,
        budget=budget,
        unit=unit,
    )


def stop_when(trigger: Trigger | None, target: Trigger | None) -> Trigger | None:
    """The target: ``target``, else "``trigger`` no longer fires", else None (no target)."""
    if target is not None:
        return target
    return None if trigger is None else Not(trigger)


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
    """Chain ``parts`` in order as one change set, labelled as ``strategy``'s decision.

    The result leaves the same projection as applying the parts one after the other,
    without what a later part undoes: a summary inserted by one part and excluded by a
    later one is never written (its replaced groups are excluded instead, with the later
    reason), and a reduction of a group that a later part excludes or summarizes is
    dropped (it would show nothing). Pipelines, budgets and the context window all
    compose through here.
    """
    changes = ChangeSet.combine(parts, strategy=strategy, params=params)
    return _without_dead_reductions(_without_dead_summaries(changes))


def _without_dead_summaries(changes: ChangeSet) -> ChangeSet:
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
    return replace(
        changes,
        exclusions=tuple(kept),
        summaries=tuple(s for s in changes.summaries if s.group_id not in dead),
    )


def _without_dead_reductions(changes: ChangeSet) -> ChangeSet:
    gone = {e.group_id for e in changes.exclusions}
    gone.update(g for s in changes.summaries for g in s.replaces)
    kept = tuple(r for r in changes.reductions if r.group_id not in gone)
    if len(kept) == len(changes.reductions):
        return changes
    return replace(changes, reductions=kept)
